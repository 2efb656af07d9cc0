#include "core/strategies/chain_segments.h"

#include <algorithm>
#include <limits>

#include "core/model/model.h"

namespace remat {
namespace {

bool reads(const Model& m, int reader, int t) {
  const auto& s = m.op(reader).saved;
  return std::find(s.begin(), s.end(), t) != s.end();
}

}  // namespace

// Mirrors checkpoint_schedule + with_frees for one segment: which tensors each
// instruction finds resident, given that only A(a-1) and A(b) cross its borders.
namespace {

// Which saved tensors each op's backward reads: itself, its input.
struct ReadFlags {
  std::vector<char> self, input;
  explicit ReadFlags(const Model& m) : self(static_cast<std::size_t>(m.size()), 0), input(static_cast<std::size_t>(m.size()), 0) {
    for (int v = 1; v < m.size(); ++v) {
      self[static_cast<std::size_t>(v)] = reads(m, v, v);
      input[static_cast<std::size_t>(v)] = reads(m, v, v - 1);
    }
  }
};

SegmentCost segment(const Model& m, const ReadFlags& rf, int a, int b);

}  // namespace

SegmentCost chain_segment(const Model& m, int a, int b) { return segment(m, ReadFlags(m), a, b); }

namespace {

SegmentCost segment(const Model& m, const ReadFlags& rf, int a, int b) {
  const int n = m.loss();
  auto reads = [&](const Model&, int reader, int t) {
    return reader >= 1 && (t == reader ? rf.self[static_cast<std::size_t>(reader)] : rf.input[static_cast<std::size_t>(reader)]) != 0;
  };
  const bool final = b == n;
  auto bytes = [&](int v) { return m.op(v).bytes; };
  // Backward readers of A(u) inside [a, b]; the last one in time is the lowest.
  auto self_read = [&](int u) { return u >= a && u <= b && reads(m, u, u); };
  auto next_read = [&](int u) { return u + 1 >= a && u + 1 <= b && reads(m, u + 1, u); };
  auto needed = [&](int u) { return self_read(u) || next_read(u); };
  auto last_reader = [&](int u) { return self_read(u) ? u : (next_read(u) ? u + 1 : -1); };

  SegmentCost out;
  int last = -1;  // a non-final segment recomputes [a, last]
  if (!final)
    for (int u = a; u < b; ++u)
      if (needed(u)) last = u;
  // A(a-1) after fwd a: still read by bwd a, or bwd a-1 (an earlier segment,
  // later in time), or this segment's recompute.
  const bool start_by_bwd = reads(m, a, a - 1) || (a - 1 >= 1 && reads(m, a - 1, a - 1));
  out.keeps_start = start_by_bwd || last >= a;

  uint64_t cur = bytes(a - 1);
  for (int v = a; v <= b; ++v) {  // the forward pass over the segment
    cur += bytes(v);
    out.peak = std::max(out.peak, cur);
    if (v == a && !out.keeps_start) cur -= bytes(a - 1);
    if (v - 1 >= a && !(final && needed(v - 1))) cur -= bytes(v - 1);
    if (final && v == b && !needed(v)) cur -= bytes(v);  // never read: dropped at once
  }
  auto bwd = [&](int v) {  // G(v-1) is made here (a Reshape's is G(v)'s storage: no bytes), G(v) goes
    const bool shared = m.shares_grad(v, v - 1);
    if (!shared) cur += m.grad_bytes(v - 1);
    out.peak = std::max(out.peak, cur);
    if (!shared) cur -= m.grad_bytes(v);
    for (int u : {v, v - 1}) {
      if (u >= a && last_reader(u) == v) cur -= bytes(u);
    }
  };
  int top = b;  // the backward steps b..top+1 run before the recompute
  if (!final) {
    cur = (out.keeps_start ? bytes(a - 1) : 0) + (self_read(b) ? bytes(b) : 0) + m.grad_bytes(b);
    // Those that read nothing the segment recomputes ([a, last]) go first.
    auto recomputed = [&](int u) { return u >= a && u <= last; };
    for (; top >= a && !(reads(m, top, top) && recomputed(top)) && !(reads(m, top, top - 1) && recomputed(top - 1)); --top)
      bwd(top);
    for (int u = a; u <= last; ++u) {
      cur += bytes(u);
      out.flops += m.op(u).fwd_flops;
      out.peak = std::max(out.peak, cur);
      if (u == a && !start_by_bwd) cur -= bytes(a - 1);
      if (u - 1 >= a && !needed(u - 1)) cur -= bytes(u - 1);
    }
  }
  for (int v = top; v >= a; --v) bwd(v);
  return out;
}

struct Label {
  uint64_t prefix;  // checkpoints before the current one
  double flops;
  int at, parent;   // checkpoint op, label index it came from
};

constexpr uint64_t kTooBig = std::numeric_limits<uint64_t>::max() / 2;

// Every segment's figures, row i holding the segments that start at i + 1.
// Non-final segments whose needed tensors alone exceed `cap` (they are all
// resident after the recompute, so this bounds the peak from below and grows
// with b) are not computed: peak kTooBig, and limit[i] is the last b computed.
struct SegmentTable {
  std::vector<std::vector<SegmentCost>> rows;
  std::vector<int> limit;
  const SegmentCost& at(int i, int b) const { return rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(b)]; }
};

SegmentTable segment_table(const Model& m, uint64_t cap) {
  const int n = m.loss();
  SegmentTable t;
  t.rows.resize(static_cast<std::size_t>(n));
  t.limit.assign(static_cast<std::size_t>(n), 0);
  const ReadFlags rf(m);
  for (int i = 0; i < n; ++i) {
    auto& row = t.rows[static_cast<std::size_t>(i)];
    row.assign(static_cast<std::size_t>(n) + 1, SegmentCost{kTooBig, 0, false});
    uint64_t needed = 0;
    int b = i + 1;
    for (; b < n; ++b) {
      const int u = b - 1;  // becomes needed once b is in the segment
      if (u >= i + 1 && (rf.self[static_cast<std::size_t>(u)] || rf.input[static_cast<std::size_t>(b)])) needed += m.op(u).bytes;
      if (needed > cap) break;
      row[static_cast<std::size_t>(b)] = segment(m, rf, i + 1, b);
    }
    t.limit[static_cast<std::size_t>(i)] = b - 1;
    row[static_cast<std::size_t>(n)] = segment(m, rf, i + 1, n);
  }
  return t;
}

// Bounds from the end, prefix ignored where noted: reach[i] is the largest
// prefix under which some completion from checkpoint i fits (-1: none), and
// least[i] the least completion cost when no prefix constrained it.
struct Bounds {
  std::vector<int64_t> reach;
  std::vector<double> least;
};

Bounds bounds(const Model& m, const SegmentTable& table, uint64_t budget) {
  const int n = m.loss();
  Bounds bd{std::vector<int64_t>(static_cast<std::size_t>(n) + 1, -1),
            std::vector<double>(static_cast<std::size_t>(n) + 1, std::numeric_limits<double>::infinity())};
  bd.least[static_cast<std::size_t>(n)] = 0;
  const auto B = static_cast<int64_t>(budget);
  for (int i = n - 1; i >= 0; --i) {
    for (int b = i + 1; b <= n; b = b == table.limit[static_cast<std::size_t>(i)] ? n : b + 1) {
      const SegmentCost& s = table.at(i, b);
      const int64_t room = B - static_cast<int64_t>(s.peak);
      if (room < 0) continue;
      bd.least[static_cast<std::size_t>(i)] = std::min(bd.least[static_cast<std::size_t>(i)], s.flops + bd.least[static_cast<std::size_t>(b)]);
      int64_t r = room;
      if (b < n) {
        const int64_t keep = s.keeps_start ? static_cast<int64_t>(m.op(i).bytes) : 0;
        if (bd.reach[static_cast<std::size_t>(b)] < keep) continue;
        r = std::min(r, bd.reach[static_cast<std::size_t>(b)] - keep);
      }
      bd.reach[static_cast<std::size_t>(i)] = std::max(bd.reach[static_cast<std::size_t>(i)], r);
    }
  }
  return bd;
}

// A label waiting at checkpoint `at` for its turn: the arena keeps only the
// labels that survive onto a Pareto front (a few per checkpoint), so the many
// candidates are sorted by value and dropped once their checkpoint is done.
struct Candidate {
  uint64_t prefix;
  double flops;
  int parent;  // arena index of the front label it extends
};

// Pareto DP over (prefix bytes, flops); `budget` bounds every segment's
// prefix + own peak. Labels that cannot finish (reach) or cannot beat `best`
// (least) are dropped. `cap` > 0 keeps at most that many labels per
// checkpoint (a quick incumbent, not exact). Returns the best final label or -1.
int run_dp(const Model& m, const SegmentTable& table, const Bounds& bd, uint64_t budget,
           std::vector<Label>& arena, double& best, std::size_t cap) {
  const int n = m.loss();
  std::vector<std::vector<Candidate>> pending(static_cast<std::size_t>(n) + 1);
  arena.clear();
  pending[0].push_back({0, 0, -1});
  int best_label = -1;
  std::vector<Candidate> front;  // increasing prefix, strictly decreasing flops
  for (int i = 0; i < n; ++i) {
    auto& ls = pending[static_cast<std::size_t>(i)];
    if (ls.empty()) continue;
    std::sort(ls.begin(), ls.end(), [](const Candidate& p, const Candidate& q) {
      return p.prefix != q.prefix ? p.prefix < q.prefix : p.flops < q.flops;
    });
    front.clear();
    for (const Candidate& c : ls)
      if (front.empty() || c.flops < front.back().flops) front.push_back(c);
    std::vector<Candidate>().swap(ls);
    if (cap > 0 && front.size() > cap) {
      std::vector<Candidate> thin;
      for (std::size_t k = 0; k < cap; ++k) thin.push_back(front[k * (front.size() - 1) / (cap - 1)]);
      front.swap(thin);
    }
    const auto& row = table.rows[static_cast<std::size_t>(i)];
    const int limit = table.limit[static_cast<std::size_t>(i)];
    for (const Candidate& lab : front) {
      arena.push_back({lab.prefix, lab.flops, i, lab.parent});
      const int l = static_cast<int>(arena.size()) - 1;
      for (int b = i + 1; b <= n; b = b >= limit ? (b == n ? n + 1 : n) : b + 1) {
        const SegmentCost& s = row[static_cast<std::size_t>(b)];
        if (lab.prefix + s.peak > budget) continue;
        const double f = lab.flops + s.flops;
        if (f + bd.least[static_cast<std::size_t>(b)] >= best) continue;
        if (b == n) {
          best = f, best_label = l;
          continue;
        }
        const uint64_t prefix = lab.prefix + (s.keeps_start ? m.op(i).bytes : 0);
        if (static_cast<int64_t>(prefix) > bd.reach[static_cast<std::size_t>(b)]) continue;
        pending[static_cast<std::size_t>(b)].push_back({prefix, f, l});
      }
    }
  }
  return best_label;
}

}  // namespace

uint64_t chain_peak(const Model& m, const std::vector<int>& checkpoints) {
  uint64_t peak = 0, prefix = 0;
  int prev = 0;
  std::vector<int> ends = checkpoints;
  ends.push_back(m.loss());
  for (int c : ends) {
    const SegmentCost s = chain_segment(m, prev + 1, c);
    peak = std::max(peak, prefix + s.peak);
    prefix += s.keeps_start ? m.op(prev).bytes : 0;
    prev = c;
  }
  return peak;
}

bool chain_budget_dp(const Model& m, uint64_t budget, std::vector<int>& checkpoints, uint64_t* predicted_peak,
                     double* flops) {
  const auto table = segment_table(m, budget);
  const Bounds bd = bounds(m, table, budget);
  if (bd.reach[0] < 0) return false;
  std::vector<Label> arena;
  auto path = [&](int l) {
    std::vector<int> c;
    for (int x = l; x > 0; x = arena[static_cast<std::size_t>(x)].parent) c.push_back(arena[static_cast<std::size_t>(x)].at);
    std::reverse(c.begin(), c.end());
    return c;
  };
  // A quick incumbent with few labels per checkpoint makes the exact pass prune.
  double best = std::numeric_limits<double>::infinity();
  int l = run_dp(m, table, bd, budget, arena, best, m.loss() <= kExactChainLayers ? 8 : 32);
  if (l < 0) return false;  // reach[0] >= 0 promises a completion; defensive
  checkpoints = path(l);
  if (m.loss() > kExactChainLayers) {  // the exact pass's label sets grow too large
    if (flops) *flops = best;
    if (predicted_peak) *predicted_peak = chain_peak(m, checkpoints);
    return true;
  }
  const double incumbent = best;
  l = run_dp(m, table, bd, budget, arena, best, 0);
  if (l >= 0) checkpoints = path(l);
  else best = incumbent;
  if (flops) *flops = best;
  if (predicted_peak) *predicted_peak = chain_peak(m, checkpoints);
  return true;
}

uint64_t chain_min_budget(const Model& m) {
  const int n = m.loss();
  uint64_t all = 0;
  for (int v = 0; v < m.size(); ++v) all += 2 * m.op(v).bytes;
  const auto table = segment_table(m, all);
  // Feasibility only needs the least prefix per checkpoint (a smaller prefix
  // never hurts later segments), so binary search the budget over that.
  auto feasible = [&](uint64_t budget) {
    const uint64_t none = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> least(static_cast<std::size_t>(n) + 1, none);
    least[0] = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t p = least[static_cast<std::size_t>(i)];
      if (p == none) continue;
      for (int b = i + 1; b <= n; ++b) {
        if (p + table.at(i, b).peak > budget) continue;  // kTooBig entries never fit
        if (b == n) return true;
        auto& q = least[static_cast<std::size_t>(b)];
        q = std::min(q, p + (table.at(i, b).keeps_start ? m.op(i).bytes : 0));
      }
    }
    return false;
  };
  uint64_t lo = 0, hi = 0;
  for (int v = 0; v < m.size(); ++v) hi += 2 * m.op(v).bytes;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (feasible(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace remat
