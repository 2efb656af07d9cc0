#include "core/strategies/optimal.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>

#include "core/base/cancel_scope.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/base/errors.h"
#include "core/strategies/repeated_blocks.h"
#include "core/strategies/residency_bound.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

// Still before `t`, and the caller has not cancelled (core/base/cancel_scope.h).
bool running(Clock::time_point t) { return Clock::now() < t && !cancel_requested(); }

struct Eval {
  uint64_t peak;
  double flops;
};

// The best set seen so far lives in the result; every evaluation goes through here.
class Search {
 public:
  Search(const Model& m, uint64_t budget, double floor, OptimalResult& r) : m_(m), budget_(budget), floor_(floor), r_(r) {
    r_.least_peak = std::numeric_limits<uint64_t>::max();
  }
  // The best set meets the floor: no schedule recomputes less, the search is done.
  bool met() const { return floor_ >= 0 && r_.found && meets_bound(r_.recompute_flops, floor_); }
  bool going(Clock::time_point t) const { return running(t) && !met(); }

  const Model& model() const { return m_; }
  uint64_t budget() const { return budget_; }
  OptimalResult& result() { return r_; }

  // Records `sim` (the simulation of `ckpt`) as a candidate.
  void record(const std::vector<int>& ckpt, const Simulation& sim) {
    ++r_.evaluated;
    r_.least_peak = std::min(r_.least_peak, sim.peak_bytes);
    if (sim.peak_bytes <= budget_ && (!r_.found || sim.recompute_flops < r_.recompute_flops)) {
      r_.found = true;
      r_.checkpoints = ckpt;
      r_.recompute_flops = sim.recompute_flops;
      r_.peak = sim.peak_bytes;
    }
  }
  Eval consider(const std::vector<int>& ckpt) {
    const Simulation s = simulate(m_, segment_schedule(m_, ckpt, "optimal"));
    record(ckpt, s);
    return {s.peak_bytes, s.recompute_flops};
  }

 private:
  const Model& m_;
  uint64_t budget_;
  double floor_;
  OptimalResult& r_;
};

// Iterated local search from the best set so far: single add/remove moves to a
// local optimum, then kicks (2-3 random flips of the best set) followed by
// local search again, until `until` or 200 kicks in a row bring nothing.
// Deterministic (fixed seed). Only an incumbent for the branch and bound.
void local_search(Search& s, Clock::time_point until) {
  const int n = s.model().loss();
  OptimalResult& r = s.result();
  auto as_set = [&](const std::vector<char>& in) {
    std::vector<int> ckpt;
    for (int u = 1; u < n; ++u)
      if (in[static_cast<std::size_t>(u)]) ckpt.push_back(u);
    return ckpt;
  };
  // Feasible beats infeasible; then fewer FLOPs, or a lower peak while nothing fits.
  auto better = [&](const Eval& a, const Eval& b) {
    const bool fa = a.peak <= s.budget(), fb = b.peak <= s.budget();
    if (fa != fb) return fa;
    return fa ? a.flops < b.flops : a.peak < b.peak;
  };
  auto descend = [&](std::vector<char>& in) {
    Eval cur = s.consider(as_set(in));
    bool improved = true;
    while (improved && s.going(until)) {
      improved = false;
      for (int v = 1; v < n && s.going(until); ++v) {
        in[static_cast<std::size_t>(v)] ^= 1;
        const Eval e = s.consider(as_set(in));
        if (better(e, cur)) {
          cur = e;
          improved = true;
        } else {
          in[static_cast<std::size_t>(v)] ^= 1;
        }
      }
    }
  };
  auto from_best = [&] {
    std::vector<char> in(static_cast<std::size_t>(n), 0);
    for (int c : r.checkpoints) in[static_cast<std::size_t>(c)] = 1;
    return in;
  };
  std::vector<char> in = from_best();
  descend(in);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> pick(1, n - 1);
  for (int quiet = 0; quiet < 200 && s.going(until); ++quiet) {
    const double before = r.found ? r.recompute_flops : std::numeric_limits<double>::infinity();
    in = from_best();
    for (int k = 0; k < 2 + quiet % 2; ++k) in[static_cast<std::size_t>(pick(rng))] ^= 1;
    descend(in);
    if (r.found && r.recompute_flops < before) quiet = -1;
  }
}

// What no extension of a checkpoint set can change. Backward runs the phases
// from the last to the first, so the phases ending at or before the set's last
// checkpoint c run last. They read only ops <= c, every later phase has freed
// what it recomputed before they start, and the gradients alive then are those
// of ops <= c whose consumers beyond c have all run. So their instructions have
// the same memory and recompute FLOPs under every set that extends this one
// with checkpoints after c: a lower bound for all of them.
struct Settled {
  uint64_t peak = 0;
  double flops = 0;
  std::size_t from = 0;  // its first instruction
};

Settled settled_part(const Model& m, const Schedule& s, const Simulation& sim, int last_checkpoint) {
  Settled e;
  std::size_t i = 0;
  const Instr final_phase_end{InstrKind::Bwd, last_checkpoint + 1};
  while (i < s.code.size() && !(s.code[i] == final_phase_end)) ++i;
  for (++i; i < s.code.size(); ++i) {  // frees right after it still belong to the final phase
    const InstrKind k = s.code[i].kind;
    if (k == InstrKind::Fwd || k == InstrKind::Bwd) break;
  }
  e.from = i;
  for (; i < s.code.size(); ++i) {
    e.peak = std::max(e.peak, sim.timeline[i]);
    if (s.code[i].kind == InstrKind::Fwd) e.flops += m.op(s.code[i].op).fwd_flops;
  }
  return e;
}

// The tensors crossing position c: ops u <= c that an op after c reads (c
// itself included). When all of them are checkpoints, later phases never
// recompute anything up to c and the forward pass up to c keeps nothing for
// later but them; the rest still resident after fwd c are checkpoints the
// settled phases read. Positions with more than kMaxCrossing are not used.
constexpr std::size_t kMaxCrossing = 16;

std::vector<std::vector<int>> crossing_tensors(const Model& m) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(m.size()));
  std::vector<int> last_read(static_cast<std::size_t>(m.size()), 0);
  for (int u = 0; u < m.size(); ++u)
    for (int w : m.consumers(u)) last_read[static_cast<std::size_t>(u)] = std::max(last_read[static_cast<std::size_t>(u)], w);
  std::vector<int> open;  // ops read after the current position, in order
  for (int c = 0; c < m.size(); ++c) {
    std::erase_if(open, [&](int u) { return last_read[static_cast<std::size_t>(u)] <= c; });
    if (last_read[static_cast<std::size_t>(c)] > c) open.push_back(c);
    if (open.size() <= kMaxCrossing) out[static_cast<std::size_t>(c)] = open;
  }
  return out;
}

// Depth-first over checkpoint sets in increasing order: a node is a set, its
// children add one checkpoint after its last. Each node is itself a candidate;
// its settled part bounds the whole subtree from below in peak and FLOPs.
// When every tensor crossing the last checkpoint c is a checkpoint (always
// so at a cut op, which no edge passes over), each later instruction holds the
// other checkpoints the settled phases read ("held bytes") plus what the
// extension and the crossing tensors decide. So among nodes at c whose
// crossing tensors the settled phases read alike, one whose (held bytes,
// settled FLOPs) another matches or beats is dominated: the same extension of
// the other is at least as good.
// Returns false when the deadline stopped it (then nothing is proven).
class BranchAndBound {
 public:
  BranchAndBound(Search& s, Clock::time_point deadline)
      : s_(s), deadline_(deadline), crossing_(crossing_tensors(s.model())), labels_(crossing_.size()) {}

  bool run() {
    std::vector<int> ckpt;
    return visit(ckpt);
  }

 private:
  bool visit(std::vector<int>& ckpt) {
    if (s_.met()) return true;
    if (!running(deadline_)) return false;
    const Model& m = s_.model();
    if (prune(ckpt)) return true;
    const int first_child = ckpt.empty() ? 1 : ckpt.back() + 1;
    for (int c = first_child; c < m.loss(); ++c) {
      ckpt.push_back(c);
      const bool done = visit(ckpt);
      ckpt.pop_back();
      if (!done) return false;
    }
    return true;
  }

  // Evaluates the set as a candidate; true when no extension can fit and beat the best.
  bool prune(const std::vector<int>& ckpt) {
    const Model& m = s_.model();
    const Schedule sched = segment_schedule(m, ckpt, "optimal");
    const Simulation sim = simulate(m, sched);
    s_.record(ckpt, sim);
    if (ckpt.empty()) return false;
    const int c = ckpt.back();
    const Settled settled = settled_part(m, sched, sim, c);
    const OptimalResult& r = s_.result();
    if (settled.peak > s_.budget() || (r.found && settled.flops >= r.recompute_flops)) return true;
    const std::vector<int>& crossing = crossing_[static_cast<std::size_t>(c)];
    if (crossing.empty()) return false;  // too many to compare nodes by
    auto kept = [&](int u) { return u == 0 || std::binary_search(ckpt.begin(), ckpt.end(), u); };
    if (!std::all_of(crossing.begin(), crossing.end(), kept)) return false;
    // The forward pass up to c holds nothing an extension could change.
    for (std::size_t i = 0; i < sched.code.size(); ++i) {
      if (sim.timeline[i] > s_.budget()) return true;
      if (sched.code[i] == Instr{InstrKind::Fwd, c}) break;
    }
    // What the settled phases read.
    std::vector<char> read(static_cast<std::size_t>(m.size()), 0);
    for (std::size_t i = settled.from; i < sched.code.size(); ++i) {
      const Instr ins = sched.code[i];
      if (ins.kind == InstrKind::Fwd)
        for (int u : m.op(ins.op).inputs) read[static_cast<std::size_t>(u)] = 1;
      if (ins.kind == InstrKind::Bwd)
        for (int u : m.op(ins.op).saved) read[static_cast<std::size_t>(u)] = 1;
    }
    uint64_t held = 0, crossing_read = 0;
    std::vector<char> counted(static_cast<std::size_t>(m.size()), 0);  // storages, once each
    auto hold = [&](int t) {
      // A checkpoint keeps its aux until its backward, which is settled.
      held += m.op(t).aux_bytes;
      if (!read[static_cast<std::size_t>(t)]) return;
      const auto at = std::find(crossing.begin(), crossing.end(), t);
      if (at != crossing.end()) {
        crossing_read |= uint64_t{1} << (at - crossing.begin());
        return;
      }
      const auto owner = static_cast<std::size_t>(m.storage(t));  // a view holds its owner's bytes
      if (!counted[owner]) held += m.op(static_cast<int>(owner)).bytes;
      counted[owner] = 1;
    };
    hold(0);  // the input is always kept
    for (int t : ckpt) hold(t);
    return dominated(c, crossing_read, held, settled.flops);
  }

  // Keeps the Pareto labels (held bytes, settled FLOPs) of the nodes at c
  // whose crossing tensors the settled phases read as `crossing_read` says.
  bool dominated(int c, uint64_t crossing_read, uint64_t held, double flops) {
    auto& labels = labels_[static_cast<std::size_t>(c)][crossing_read];
    for (const auto& [h, f] : labels)
      if (h <= held && f <= flops) return true;
    std::erase_if(labels, [&](const auto& l) { return held <= l.first && flops <= l.second; });
    labels.emplace_back(held, flops);
    return false;
  }

  Search& s_;
  Clock::time_point deadline_;
  std::vector<std::vector<int>> crossing_;
  std::vector<std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, double>>>> labels_;
};

}  // namespace

OptimalResult optimal_search(const Model& m, uint64_t budget, double time_limit_s, double floor,
                             const std::vector<std::vector<int>>& seeds) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_limit_s));
  OptimalResult r;
  Search s(m, budget, floor, r);
  // Seeds: the caller's, then the named families.
  const int n = m.loss();
  for (const auto& seed : seeds)
    if (s.going(deadline)) s.consider(seed);
  s.consider({});
  for (int k = 1; k < n && s.going(deadline); ++k) s.consider(every_k_boundaries(m, k));
  s.consider(auto_checkpoints(m));
  s.consider(selective_checkpoints(m));
  s.consider(articulation_candidates(m));
  // The hand-written policies for real networks, where the model has them.
  if (attention_core_absent(m).empty()) s.consider(attention_core_checkpoints(m));
  if (blocks_absent(m).empty())
    for (int every : {1, 2}) s.consider(block_input_checkpoints(m, every));
  // A good incumbent prunes most of the tree; small graphs need none.
  if (n - 1 > kSeedSearchAboveOps) local_search(s, start + (deadline - start) / 4);
  r.proven = BranchAndBound(s, deadline).run();
  return r;
}

}  // namespace remat
