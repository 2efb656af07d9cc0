#include "core/strategies/first_step_bound.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <vector>

#include "core/base/cancel_scope.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/repeated_blocks.h"
#include "core/strategies/residency_bound.h"

namespace remat {
namespace {

struct Choice {
  uint64_t bytes = 0;  // held at the step beyond what nothing can change
  double flops = 0;    // recomputed later, at least
  bool reads_input = false;  // a recomputation it decides reads the cut before its segment
  int64_t leaf = 0;          // which leaf of the enumeration (to find its storages again)
};

// One segment's choices, enumerated: its storages from the last to the first
// (every reader inside the segment decided first). A storage the step must
// keep for later (store-all holds it there), or that a recomputation decided
// above reads, is held or recomputed; one whose aux a later backward reads
// keeps the aux unless recomputed; any other is neither. `input`: the
// storage of the cut before the segment (-1 where it is always there: the
// model's input, or one the step reads); the choices say whether a
// recomputation reads it. `output_read`: a later segment's recomputation
// reads the segment's last op (its cut), so that storage must be held or
// recomputed even where the step itself does not need it. Returns false
// past 2^kFirstStepChoices leaves. The per-storage arrays are the model's,
// shared by all segments (`required` is all zero between walks): a segment
// holds only its own ops.
class Segment {
 public:
  Segment(const Model& m, int first, int last, std::vector<int> owners, const std::vector<char>& needed,
          const std::vector<char>& aux_needed, const std::vector<char>& fixed, std::vector<int>& required, int input)
      : m_(m), first_(first), last_(last), owners_(std::move(owners)), needed_(needed), aux_needed_(aux_needed),
        fixed_(fixed), required_(required), input_(input) {}

  // The Pareto front of (bytes, flops), per whether the choice reads the input.
  bool enumerate(int output, bool output_read, std::vector<Choice> (&front)[2]) {
    std::vector<Choice> leaves;
    if (!walk(output, output_read, -1, leaves, nullptr)) return false;
    std::sort(leaves.begin(), leaves.end(), [](const Choice& a, const Choice& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.flops < b.flops;
    });
    for (auto& f : front) f.clear();
    for (const Choice& c : leaves) {
      auto& f = front[c.reads_input];
      if (f.empty() || c.flops < f.back().flops) f.push_back(c);
    }
    return true;
  }

  // The storages leaf `leaf` of enumerate(output, output_read) recomputes.
  std::vector<int> recomputed(int output, bool output_read, int64_t leaf) {
    std::vector<Choice> leaves;
    std::vector<int> found;
    walk(output, output_read, leaf, leaves, &found);
    return found;
  }

 private:
  bool walk(int output, bool output_read, int64_t target, std::vector<Choice>& leaves, std::vector<int>* found) {
    leaves_ = &leaves, target_ = target, found_ = found, path_.clear();
    const int out = output >= 0 ? m_.storage(output) : -1;
    // An output whose storage is the input's (a segment of views): read, it is the input read.
    const bool passes = output_read && out >= 0 && out == input_;
    if (output_read && out >= 0) ++required_[static_cast<std::size_t>(out)];
    Choice root;
    root.reads_input = passes;
    const bool ok = visit(static_cast<int>(owners_.size()) - 1, root);
    if (output_read && out >= 0) --required_[static_cast<std::size_t>(out)];
    return ok;
  }

  bool visit(int i, Choice c) {
    if (i < 0) {
      c.leaf = static_cast<int64_t>(leaves_->size());
      if (found_ && c.leaf == target_) {
        *found_ = path_;
        return false;  // found: the walk stops here
      }
      leaves_->push_back(c);
      return leaves_->size() <= (std::size_t{1} << kFirstStepChoices);
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
      if (s == input_) again.reads_input = true;
      // Always there: outside the segment (the cut before it, decided there), or one the step reads.
      if (s < first_ || s > last_ || fixed_[static_cast<std::size_t>(s)]) continue;
      ++required_[static_cast<std::size_t>(s)];
      marked.push_back(s);
    }
    path_.push_back(v);
    const bool ok = visit(i - 1, again);
    path_.pop_back();
    for (int s : marked) --required_[static_cast<std::size_t>(s)];
    return ok;
  }

  const Model& m_;
  int first_, last_;  // its ops
  std::vector<int> owners_;
  const std::vector<char>& needed_;
  const std::vector<char>& aux_needed_;
  const std::vector<char>& fixed_;
  std::vector<int>& required_;  // per storage: recomputations decided so far that read it
  int input_;
  std::vector<Choice>* leaves_ = nullptr;
  int64_t target_ = -1;
  std::vector<int>* found_ = nullptr;
  std::vector<int> path_;  // storages recomputed on the way to the current leaf
};

// Above this many points a partial front along the chain is thinned: the
// points in one of that many ranges of bytes become one, with the least bytes
// and the least FLOPs of the range (a point no choice reaches, so the bound
// only drops, and `exact` says so). And a segment's front times the front of
// the segments after it is kept under kMaxPairs (thinning the latter), so
// memory and time stay bounded on long chains of wide segments.
constexpr std::size_t kMaxFront = std::size_t{1} << 15;
constexpr std::size_t kMaxPairs = std::size_t{1} << 22;

// The segments' fronts combined along the chain, from the last segment to the
// first, as exact Pareto fronts of (bytes, FLOPs) within the room: at each
// segment, one front per whether the segments from it on read the cut
// before it.
class Row {
 public:
  struct Seg {
    int first = 0, last = 0;
    std::vector<Choice> front[2][2];  // [its cut read by the segment after][it reads the cut before]
  };
  std::vector<Seg> segs;

  // The least FLOPs within `room` (infinity when none), and per segment which
  // choice: (read, reads, index) into its fronts.
  struct Pick {
    int read = 0, reads = 0;
    std::size_t index = 0;
  };
  double solve(uint64_t room, std::vector<Pick>* picks, bool* exact) const {
    struct Point {
      uint64_t bytes;
      double flops;
      uint32_t prev;  // into the next segment's front `read`
      uint32_t choice;
      uint8_t read;
    };
    const std::size_t S = segs.size();
    // fronts[s][r]: segments s.. with r: whether segment s reads the cut before it.
    std::vector<std::array<std::vector<Point>, 2>> fronts(S + 1);
    fronts[S][0].push_back({0, 0, 0, 0, 0});
    // At most `most` points: one per range of room / most bytes.
    auto thin = [&](std::vector<Point>& front, std::size_t most) {
      if (front.size() <= most) return;
      *exact = false;
      const uint64_t slot = std::max<uint64_t>(1, room / most);
      std::vector<Point> out;
      for (const Point& p : front) {
        if (!out.empty() && out.back().bytes / slot == p.bytes / slot) {
          const uint64_t least = out.back().bytes;  // the range's least bytes, its least FLOPs (the later point's)
          out.back() = p;
          out.back().bytes = least;
        } else {
          out.push_back(p);
        }
      }
      front = std::move(out);
    };
    std::vector<Point> cand;
    for (std::size_t s = S; s-- > 0;) {
      std::size_t widest = 1;
      for (const auto& by_read : segs[s].front)
        for (const auto& f : by_read) widest = std::max(widest, f.size());
      for (auto& after : fronts[s + 1]) thin(after, std::max<std::size_t>(64, kMaxPairs / widest));
      for (int reads = 0; reads < 2; ++reads) {
        cand.clear();
        for (int read = 0; read < 2; ++read) {
          const auto& after = fronts[s + 1][static_cast<std::size_t>(read)];
          const auto& mine = segs[s].front[read][reads];
          for (std::size_t ci = 0; ci < mine.size(); ++ci)
            for (std::size_t pi = 0; pi < after.size(); ++pi) {
              const uint64_t b = mine[ci].bytes + after[pi].bytes;
              if (b > room) break;  // `after` is by increasing bytes
              cand.push_back({b, mine[ci].flops + after[pi].flops, static_cast<uint32_t>(pi), static_cast<uint32_t>(ci),
                              static_cast<uint8_t>(read)});
            }
        }
        std::sort(cand.begin(), cand.end(),
                  [](const Point& a, const Point& b) { return a.bytes != b.bytes ? a.bytes < b.bytes : a.flops < b.flops; });
        auto& front = fronts[s][static_cast<std::size_t>(reads)];
        for (const Point& p : cand)
          if (front.empty() || p.flops < front.back().flops) front.push_back(p);
      }
      for (auto& front : fronts[s]) thin(front, kMaxFront);
    }
    // The least: the last point of each front at the first segment.
    double best = std::numeric_limits<double>::infinity();
    int best_r = -1;
    for (int r = 0; r < 2; ++r)
      if (!fronts[0][static_cast<std::size_t>(r)].empty() && fronts[0][static_cast<std::size_t>(r)].back().flops < best)
        best = fronts[0][static_cast<std::size_t>(r)].back().flops, best_r = r;
    if (picks && best_r >= 0) {
      picks->assign(S, {});
      int r = best_r;
      std::size_t i = fronts[0][static_cast<std::size_t>(r)].size() - 1;
      for (std::size_t s = 0; s < S; ++s) {
        const Point& p = fronts[s][static_cast<std::size_t>(r)][i];
        (*picks)[s] = {p.read, r, p.choice};
        r = p.read, i = p.prev;
      }
    }
    return best;
  }
};

}  // namespace

FirstStepBound first_step_bound(const Model& m, uint64_t budget, bool schedule, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = seconds >= 1e9 ? std::chrono::steady_clock::time_point::max()
                                    : start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(seconds));
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

  // Segments between cuts. Each one's only input from outside is the cut
  // before it: when one of its recomputations reads that cut, the segment
  // before must hold the cut's storage at the step or recompute it too. So
  // each segment's choices are enumerated twice (its own cut read after or
  // not), and the chain (Row) carries whether the segments after read it.
  std::vector<int> bounds = model_cuts(m);
  bounds.push_back(m.loss() - 1);
  Row row;
  std::vector<Segment> segments;
  std::vector<int> required(n, 0);
  int prev = 0;
  for (int c : bounds) {
    if (c <= prev) continue;
    if (std::chrono::steady_clock::now() >= until || cancel_requested()) return out;
    std::vector<int> owners;
    for (int v = prev + 1; v <= c; ++v)
      if (!m.op(v).view && !fixed[static_cast<std::size_t>(v)]) owners.push_back(v);
    const int in = m.storage(prev);
    segments.emplace_back(m, prev + 1, c, std::move(owners), needed, aux_needed, fixed, required,
                          fixed[static_cast<std::size_t>(in)] ? -1 : in);
    Row::Seg s;
    s.first = prev + 1, s.last = c;
    for (int read = 0; read < 2; ++read)
      if (!segments.back().enumerate(c, read != 0, s.front[read])) return out;
    row.segs.push_back(std::move(s));
    prev = c;
  }

  std::vector<Row::Pick> picks;
  const double least = row.solve(room, &picks, &out.exact);
  out.computed = true;
  out.infeasible = least == std::numeric_limits<double>::infinity();
  out.bound = out.infeasible ? 0 : least;

  // The least choice as a schedule.
  if (schedule && !out.infeasible) {
    std::vector<int> recomputed;
    for (std::size_t s = 0; s < picks.size(); ++s) {
      const Row::Pick& p = picks[s];
      const Choice& c = row.segs[s].front[p.read][p.reads][p.index];
      const std::vector<int> mine = segments[s].recomputed(row.segs[s].last, p.read != 0, c.leaf);
      recomputed.insert(recomputed.end(), mine.begin(), mine.end());
    }
    std::sort(recomputed.begin(), recomputed.end());
    out.compute = residency_schedule(m, recomputed);
    const Simulation got = simulate(m, with_frees(m, out.compute, "first-step"), {.timeline = false});
    out.recomputed = std::move(recomputed);
    out.recompute_flops = got.recompute_flops;
    out.peak = got.peak_bytes;
    out.fits = got.peak_bytes <= budget;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace remat
