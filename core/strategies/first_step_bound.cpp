#include "core/strategies/first_step_bound.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {
namespace {

struct Choice {
  uint64_t bytes = 0;  // held at the step beyond what nothing can change
  double flops = 0;    // recomputed later, at least
};

// One segment's choices, enumerated: its storages from the last to the first
// (every reader inside the segment decided first). A storage the step must
// keep for later (store-all holds it there), or that a recomputation decided
// above reads, is held or recomputed; one whose aux a later backward reads
// keeps the aux unless recomputed; any other is neither. Returns false past
// 2^kFirstStepChoices leaves.
class Segment {
 public:
  Segment(const Model& m, std::vector<int> owners, const std::vector<char>& needed, const std::vector<char>& aux_needed,
          const std::vector<char>& free_input)
      : m_(m), owners_(std::move(owners)), needed_(needed), aux_needed_(aux_needed), free_(free_input),
        required_(static_cast<std::size_t>(m.size()), 0) {}

  bool enumerate(std::vector<Choice>& front) {
    leaves_.clear();
    if (!visit(static_cast<int>(owners_.size()) - 1, {})) return false;
    std::sort(leaves_.begin(), leaves_.end(), [](const Choice& a, const Choice& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.flops < b.flops;
    });
    front.clear();
    for (const Choice& c : leaves_)
      if (front.empty() || c.flops < front.back().flops) front.push_back(c);
    return true;
  }

 private:
  bool visit(int i, Choice c) {
    if (i < 0) {
      leaves_.push_back(c);
      return leaves_.size() <= (std::size_t{1} << kFirstStepChoices);
    }
    const int v = owners_[static_cast<std::size_t>(i)];
    const auto vv = static_cast<std::size_t>(v);
    const bool out = needed_[vv] || required_[vv] > 0, aux = aux_needed_[vv] != 0;
    if (!out && !aux) return visit(i - 1, c);
    // Kept: its storage where something needs it, its aux where a backward reads it.
    Choice kept = c;
    kept.bytes += (out ? m_.op(v).bytes : 0) + (aux ? m_.op(v).aux_bytes : 0);
    if (!visit(i - 1, kept)) return false;
    // Recomputed later: at least its forward FLOPs, its inputs there then.
    Choice again = c;
    again.flops += m_.op(v).fwd_flops;
    std::vector<int> marked;
    for (int u : m_.op(v).inputs) {
      const int s = m_.storage(u);
      if (free_[static_cast<std::size_t>(s)]) continue;
      ++required_[static_cast<std::size_t>(s)];
      marked.push_back(s);
    }
    const bool ok = visit(i - 1, again);
    for (int s : marked) --required_[static_cast<std::size_t>(s)];
    return ok;
  }

  const Model& m_;
  std::vector<int> owners_;
  const std::vector<char>& needed_;
  const std::vector<char>& aux_needed_;
  const std::vector<char>& free_;
  std::vector<int> required_;  // per storage: recomputations decided so far that read it
  std::vector<Choice> leaves_;
};

}  // namespace

FirstStepBound first_step_bound(const Model& m, uint64_t budget) {
  const auto start = std::chrono::steady_clock::now();
  FirstStepBound out;
  // Store-all's state at the loss's backward step.
  const Schedule sa = segment_schedule(m, {}, "store-all");
  const Simulation sim = simulate(m, sa);
  std::size_t at = 0;
  while (!(sa.code[at] == Instr{InstrKind::Bwd, m.loss()})) ++at;
  ResidentSet rs(m);
  for (std::size_t i = 0; i <= at; ++i) rs.apply(m, sa.code[i]);
  const auto n = static_cast<std::size_t>(m.size());
  // What the step itself reads, and the input, are there in every schedule.
  std::vector<char> fixed(n, 0);
  fixed[static_cast<std::size_t>(m.storage(0))] = 1;
  for (int u : m.op(m.loss()).saved) fixed[static_cast<std::size_t>(m.storage(u))] = 1;
  fixed[static_cast<std::size_t>(m.storage(m.loss()))] = 1;
  std::vector<char> needed(n, 0), aux_needed(n, 0);
  uint64_t decided = 0;  // store-all's bytes at the step that the choices account for
  for (int v = 1; v < m.loss(); ++v) {
    const auto vv = static_cast<std::size_t>(v);
    if (!m.op(v).view && rs.holders[vv] > 0 && !fixed[vv]) needed[vv] = 1, decided += m.op(v).bytes;
    if (rs.aux[vv]) aux_needed[vv] = 1, decided += m.op(v).aux_bytes;
  }
  const uint64_t step = sim.timeline[at];
  const uint64_t rest = step - decided;  // gradients, the loss's tensors, the input: in every schedule
  if (rest > budget) {
    out.computed = out.infeasible = true;
    return out;
  }
  const uint64_t room = budget - rest;

  // Segments between cuts; each one's only input from outside is the cut
  // before it, taken as there whenever needed (which can only lower the bound).
  std::vector<int> bounds = model_cuts(m);
  bounds.push_back(m.loss() - 1);
  std::vector<std::vector<Choice>> fronts;
  int prev = 0;
  for (int c : bounds) {
    if (c <= prev) continue;
    std::vector<int> owners;
    std::vector<char> outside(n, 1);
    for (int v = prev + 1; v <= c; ++v) {
      outside[static_cast<std::size_t>(v)] = static_cast<char>(fixed[static_cast<std::size_t>(v)]);
      if (!m.op(v).view && !fixed[static_cast<std::size_t>(v)]) owners.push_back(v);
    }
    std::vector<Choice> front;
    if (!Segment(m, owners, needed, aux_needed, outside).enumerate(front)) return out;
    fronts.push_back(std::move(front));
    prev = c;
  }

  // The knapsack: the least FLOPs whose bytes fit the room, in units of
  // room/16384, each choice's bytes rounded down (so the bound only drops).
  const uint64_t unit = std::max<uint64_t>(1, room / 16384);
  const std::size_t K = static_cast<std::size_t>(room / unit);
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> cur(K + 1, 0.0), nxt(K + 1);
  for (const auto& front : fronts) {
    std::fill(nxt.begin(), nxt.end(), inf);
    for (const Choice& c : front) {
      const std::size_t w = static_cast<std::size_t>(c.bytes / unit);
      for (std::size_t k = w; k <= K; ++k) nxt[k] = std::min(nxt[k], cur[k - w] + c.flops);
    }
    std::swap(cur, nxt);
  }
  out.computed = true;
  out.infeasible = cur[K] == inf;
  out.bound = out.infeasible ? 0 : cur[K];
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace remat
