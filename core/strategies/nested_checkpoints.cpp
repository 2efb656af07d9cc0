#include "core/strategies/nested_checkpoints.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/revolve.h"

namespace remat {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The tables' budget: cells (4 per segment and memory level) and the work of
// filling them (8 split evaluations per segment, split point and memory level:
// about a second). Beyond it the chain is grouped and memory counted coarser.
constexpr double kMaxCells = 1.5e7;
constexpr double kMaxWork = 4.0e8;
// When even that cannot be exact, the grouped tables are only a candidate
// beside the single-level DP (budget.cpp): a quarter of the work.
constexpr double kMaxApproxWork = 1.0e8;
constexpr int64_t kCoarseLevels = 256;

// The chain in memory units: A(v) and G(v) rounded up to the unit. in[v]: bwd
// v reads A(v-1); self[v]: bwd v reads A(v). Op N is the loss.
//
// The loss's output (a scalar, say 4 bytes) is the one size that need not be
// a multiple of the unit: every sum it joins is a multiple of the unit plus
// A(N), and that sum fits `budget` exactly when the multiple fits
// floor(budget / unit) - ceil((A(N) - budget mod unit) / unit) units.
struct Chain {
  int n = 0;
  std::vector<int64_t> a, g;
  std::vector<double> f, f_sum;  // f_sum[k] = f[1] + ... + f[k]
  std::vector<char> in, self;
  std::vector<int> in_count, self_count;  // prefix counts over 1..k

  Chain(const Model& m, uint64_t unit, uint64_t budget) : n(m.loss()) {
    const auto size = static_cast<std::size_t>(n) + 1;
    a.resize(size), g.resize(size), f.assign(size, 0), f_sum.assign(size, 0);
    in.assign(size, 0), self.assign(size, 0), in_count.assign(size, 0), self_count.assign(size, 0);
    auto units = [&](uint64_t bytes) { return static_cast<int64_t>((bytes + unit - 1) / unit); };
    for (int v = 0; v <= n; ++v) {
      const auto i = static_cast<std::size_t>(v);
      a[i] = units(m.op(v).bytes);
      if (v == n) {
        const uint64_t rest = budget % unit, loss = m.op(v).bytes;
        a[i] = loss <= rest ? 0 : units(loss - rest);
      }
      g[i] = units(m.grad_bytes(v));
      if (v == 0) continue;
      f[i] = m.op(v).fwd_flops;
      f_sum[i] = f_sum[i - 1] + f[i];
      for (int t : m.op(v).saved) (t == v ? self : in)[i] = 1;
      in_count[i] = in_count[i - 1] + in[i];
      self_count[i] = self_count[i - 1] + self[i];
    }
  }
  bool I(int v) const { return in[static_cast<std::size_t>(v)] != 0; }
  bool S(int v) const { return self[static_cast<std::size_t>(v)] != 0; }
  int64_t A(int v) const { return a[static_cast<std::size_t>(v)]; }
  int64_t G(int v) const { return g[static_cast<std::size_t>(v)]; }
  double flops(int from, int to) const { return f_sum[static_cast<std::size_t>(to)] - f_sum[static_cast<std::size_t>(from)]; }
  bool any_in(int lo, int hi) const {
    return lo <= hi && in_count[static_cast<std::size_t>(hi)] > in_count[static_cast<std::size_t>(lo) - 1];
  }
  bool any_self(int lo, int hi) const {
    return lo <= hi && self_count[static_cast<std::size_t>(hi)] > self_count[static_cast<std::size_t>(lo) - 1];
  }
  // Whether reversing ops s+1..e reads A(s): bwd s+1 does, or some A(k),
  // s < k, must be recomputed from it (held: A(e) is resident for bwd e).
  bool reads_base(int s, int e, bool held) const {
    return I(s + 1) || any_in(s + 2, e) || any_self(s + 1, e - 1) || (S(e) && !held);
  }
};

// One step of the coarse chain: the ops (from, to] between two positions
// where checkpoints may be stored (every op when exact).
struct Group {
  int from = 0, to = 0;
  int64_t entry = 0;    // A(from+1): the first advance step's output
  int64_t inner = 0;    // largest A(k-1) + A(k) among its other advance steps
  double flops = 0;     // one advance through it
  // Reversing it alone (A(from) stored, G(to) resident), everything it needs
  // recomputed once and kept: peak units [held][keep_base] and FLOPs [held].
  int64_t peak[2][2] = {{0, 0}, {0, 0}};
  double cost[2] = {0, 0};
};

// Peak of reversing the ops (from, to] alone: A(from) resident while read (to
// the end when `keep_base`), A(to) held for bwd to when `held`, every other
// tensor a backward step reads recomputed once in order and freed after its
// last read, the gradients G(to) and then G(k-1) for each bwd k.
int64_t group_peak(const Chain& c, int from, int to, bool held, bool keep_base, double& cost) {
  std::vector<int> last(static_cast<std::size_t>(to - from + 1), -1);  // last read, in instruction order
  std::vector<int> compute;
  auto needed = [&](int k) { return (k < to && ((c.S(k)) || c.I(k + 1))) || (k == to && c.S(to) && !held); };
  int hi = from;
  for (int k = from + 1; k <= to; ++k)
    if (needed(k)) hi = k;
  cost = c.flops(from, hi);
  for (int k = from + 1; k <= hi; ++k) compute.push_back(k);
  int t = 0;
  for (int k : compute) last[static_cast<std::size_t>(k - 1 - from)] = t++;  // fwd k reads A(k-1)
  for (int k = to; k > from; --k, ++t) {
    if (c.I(k)) last[static_cast<std::size_t>(k - 1 - from)] = t;
    if (c.S(k)) last[static_cast<std::size_t>(k - from)] = t;
  }
  if (keep_base) last[0] = t;
  std::vector<char> live(last.size(), 0);
  live[0] = last[0] >= 0;
  if (held) live.back() = 1;
  int64_t resident = (live[0] ? c.A(from) : 0) + (held ? c.A(to) : 0) + c.G(to), peak = 0;
  auto drop_after = [&](int instr) {
    for (std::size_t i = 0; i < live.size(); ++i)
      if (live[i] && last[i] <= instr) live[i] = 0, resident -= c.A(from + static_cast<int>(i));
  };
  t = 0;
  for (int k : compute) {
    live[static_cast<std::size_t>(k - from)] = 1;
    resident += c.A(k);
    peak = std::max(peak, resident);
    drop_after(t++);
  }
  for (int k = to; k > from; --k) {
    resident += c.G(k - 1);
    peak = std::max(peak, resident);
    resident -= c.G(k);
    drop_after(t++);
  }
  return peak;
}

enum class Move : uint8_t { None, Backward, Reverse, Split };
struct Choice {
  Move move = Move::None;
  int at = 0;
  bool held = false;
};

// rev(s, e, h, p)[u]: least forward FLOPs to run the backward of coarse steps
// e..s+1 with u units for what this segment holds: A(s) (resident if the
// segment reads it, or p: read after it), G(e), and A(e) when h (held for its
// own backward). top(s, p)[u]: the same for s..the loss before any backward
// step (the forward pass from A(s) on). Filled by segment length, so every
// part a split needs is ready.
class NestedTables {
 public:
  NestedTables(const Chain& c, std::vector<int> positions, int64_t levels)
      : c_(c), pos_(std::move(positions)), k_(static_cast<int>(pos_.size())), levels_(levels) {
    groups_.resize(static_cast<std::size_t>(k_));
    for (int j = 1; j < k_; ++j) {
      Group& gr = groups_[static_cast<std::size_t>(j)];
      gr.from = pos_[static_cast<std::size_t>(j) - 1], gr.to = pos_[static_cast<std::size_t>(j)];
      gr.entry = c.A(gr.from + 1);
      for (int k = gr.from + 2; k <= gr.to; ++k) gr.inner = std::max(gr.inner, c.A(k - 1) + c.A(k));
      gr.flops = c.flops(gr.from, gr.to);
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 2; ++p) gr.peak[h][p] = group_peak(c, gr.from, gr.to, h != 0, p != 0, gr.cost[h]);
    }
    rev_.assign(static_cast<std::size_t>(k_) * static_cast<std::size_t>(k_ - 1) / 2 * 4 * width(), kInf);
    top_.assign(static_cast<std::size_t>(k_) * 2 * width(), kInf);
    for (int l = 1; l < k_; ++l)
      for (int s = 0; s + l < k_; ++s)
        for (int h = 0; h < 2; ++h)
          for (int p = 0; p < 2; ++p)
            if (canonical(s, s + l, h, p)) fill_rev(s, s + l, h != 0, p != 0);
    for (int s = k_ - 1; s >= 0; --s)
      for (int p = 0; p < 2; ++p)
        if (p == 0 || !c_.I(pos_[static_cast<std::size_t>(s)] + 1)) fill_top(s, p != 0);
  }

  double top(int s, bool p, int64_t u) const { return u < 0 ? kInf : top_row(s, p)[u]; }
  double rev(int s, int e, bool h, bool p, int64_t u) const { return u < 0 ? kInf : rev_row(s, e, h, p)[u]; }
  int position(int j) const { return pos_[static_cast<std::size_t>(j)]; }
  int size() const { return k_; }

  // The move that reaches rev(s, e, h, p)[u] (top when e is the loss).
  Choice choose(int s, int e, bool h, bool p, int64_t u) const {
    const bool is_top = e == k_;
    const double want = is_top ? top(s, p, u) : rev(s, e, h, p, u);
    Choice found;
    options(s, e, h, p, [&](Choice ch, int64_t from_u, auto&& value) {
      if (found.move == Move::None && u >= from_u && value(u) == want) found = ch;
    });
    return found;
  }

  // Units of A(pos[s]) the right part of a split at c does not have.
  int64_t held_base(int s, int c, bool held, bool p) const {
    return (p || reads(s, c, held)) ? c_.A(pos_[static_cast<std::size_t>(s)]) : 0;
  }

 private:
  std::size_t width() const { return static_cast<std::size_t>(levels_) + 1; }
  // p only matters when bwd pos[s]+1 does not read A(pos[s]); h only when
  // bwd pos[e] reads A(pos[e]).
  bool canonical(int s, int e, int h, int p) const {
    return (h == 0 || c_.S(pos_[static_cast<std::size_t>(e)])) && (p == 0 || !c_.I(pos_[static_cast<std::size_t>(s)] + 1));
  }
  std::size_t rev_index(int s, int e, bool h, bool p) const {
    if (!c_.S(pos_[static_cast<std::size_t>(e)])) h = false;
    if (c_.I(pos_[static_cast<std::size_t>(s)] + 1)) p = false;
    const std::size_t pair = static_cast<std::size_t>(e) * static_cast<std::size_t>(e - 1) / 2 + static_cast<std::size_t>(s);
    return (pair * 4 + (h ? 2 : 0) + (p ? 1 : 0)) * width();
  }
  const double* rev_row(int s, int e, bool h, bool p) const { return &rev_[rev_index(s, e, h, p)]; }
  double* rev_row(int s, int e, bool h, bool p) { return &rev_[rev_index(s, e, h, p)]; }
  const double* top_row(int s, bool p) const {
    if (c_.I(pos_[static_cast<std::size_t>(s)] + 1)) p = false;
    return &top_[(static_cast<std::size_t>(s) * 2 + (p ? 1 : 0)) * width()];
  }
  double* top_row(int s, bool p) { return const_cast<double*>(static_cast<const NestedTables*>(this)->top_row(s, p)); }
  bool reads(int s, int e, bool h) const {
    return c_.reads_base(pos_[static_cast<std::size_t>(s)], pos_[static_cast<std::size_t>(e)], h);
  }

  // Calls visit(choice, least u, value(u)) for every move from (s, e, h, p);
  // e == k_ means top(s, p).
  template <class Visit>
  void options(int s, int e, bool h, bool p, Visit&& visit) const {
    const bool is_top = e == k_;
    const int ps = pos_[static_cast<std::size_t>(s)];
    if (is_top) {
      if (s == k_ - 1) {  // the loss's forward and backward from A(N-1)
        const int n = c_.n;
        const int64_t need = std::max(c_.A(ps) + c_.A(n), ((p || c_.I(n)) ? c_.A(ps) : 0) + (c_.S(n) ? c_.A(n) : 0) + c_.G(n - 1));
        const double f = c_.f[static_cast<std::size_t>(n)];
        visit(Choice{Move::Backward, 0, false}, need, [f](int64_t) { return f; });
      }
    } else {
      const int pe = pos_[static_cast<std::size_t>(e)];
      const int64_t base = (p || reads(s, e, h)) ? c_.A(ps) : 0;
      if (e == s + 1) {  // one group: reverse it alone
        const Group& gr = groups_[static_cast<std::size_t>(e)];
        const double f = gr.cost[h ? 1 : 0];
        visit(Choice{Move::Reverse, 0, false}, gr.peak[h ? 1 : 0][p ? 1 : 0], [f](int64_t) { return f; });
      } else if (pe - 1 == pos_[static_cast<std::size_t>(e) - 1] && !c_.I(pe) && (!c_.S(pe) || h)) {
        // bwd pe reads nothing that is not resident: straight away.
        const double* rest = rev_row(s, e - 1, false, p);
        visit(Choice{Move::Backward, 0, false}, base + (h ? c_.A(pe) : 0) + c_.G(pe) + c_.G(pe - 1),
              [rest](int64_t u) { return rest[u]; });
      }
    }
    // Advance from A(pos[s]) to A(pos[c]), store it, reverse [c, e] with
    // A(pos[s]) held if read later, then [s, c].
    const int64_t context = is_top ? 0 : c_.G(pos_[static_cast<std::size_t>(e)]) + (h ? c_.A(pos_[static_cast<std::size_t>(e)]) : 0);
    int64_t adv_keep = 0, adv_drop = 0;
    for (int c = s + 1; c < e; ++c) {
      const Group& gr = groups_[static_cast<std::size_t>(c)];
      const int64_t step = c == s + 1 ? std::max(c_.A(ps) + gr.entry, gr.inner)
                                      : std::max(c_.A(gr.from) + gr.entry, gr.inner);
      adv_keep = std::max(adv_keep, c_.A(ps) + std::max(c == s + 1 ? gr.entry : step, gr.inner));
      adv_drop = std::max(adv_drop, step);
      const double adv = c_.flops(ps, gr.to);
      for (int held = 0; held <= (c_.S(gr.to) ? 1 : 0); ++held) {
        if (!is_top && !held && !reads(c, e, h)) continue;  // A(pos[c]) would never be read
        const int64_t keep = held_base(s, c, held != 0, p);
        const int64_t need = (keep ? adv_keep : adv_drop) + context;
        const double* right = is_top ? top_row(c, held != 0) : rev_row(c, e, h, held != 0);
        const double* left = rev_row(s, c, held != 0, p);
        visit(Choice{Move::Split, c, held != 0}, std::max(need, keep),
              [adv, right, left, keep](int64_t u) { return adv + right[u - keep] + left[u]; });
      }
    }
  }

  void fill(double* row, int s, int e, bool h, bool p) {
    options(s, e, h, p, [&](Choice, int64_t from_u, auto&& value) {
      for (int64_t u = std::max<int64_t>(from_u, 0); u <= levels_; ++u) row[u] = std::min(row[u], value(u));
    });
  }
  void fill_rev(int s, int e, bool h, bool p) { fill(rev_row(s, e, h, p), s, e, h, p); }
  void fill_top(int s, bool p) { fill(top_row(s, p), s, k_, false, p); }

  const Chain& c_;
  std::vector<int> pos_;
  int k_;
  int64_t levels_;
  std::vector<Group> groups_;
  std::vector<double> rev_, top_;
};

void emit_fwd(int from, int to, std::vector<Instr>& code) {
  for (int v = from; v <= to; ++v) code.push_back({InstrKind::Fwd, v});
}

// The program a group's lone reversal runs (group_peak's order).
void emit_group(const Chain& c, int from, int to, bool held, std::vector<Instr>& code) {
  int hi = from;
  for (int k = from + 1; k <= to; ++k)
    if ((k < to && (c.S(k) || c.I(k + 1))) || (k == to && c.S(to) && !held)) hi = k;
  emit_fwd(from + 1, hi, code);
  for (int k = to; k > from; --k) code.push_back({InstrKind::Bwd, k});
}

// Replays the choices into a program (recursion depth: at most the number of
// coarse positions).
void emit(const NestedTables& t, const Chain& c, int s, int e, bool h, bool p, int64_t u, std::vector<Instr>& code) {
  while (true) {
    const Choice why = t.choose(s, e, h, p, u);
    const bool is_top = e == t.size();
    switch (why.move) {
      case Move::Backward:
        if (is_top) {
          code.push_back({InstrKind::Fwd, c.n});
          code.push_back({InstrKind::Bwd, c.n});
          return;
        }
        code.push_back({InstrKind::Bwd, t.position(e)});
        --e, h = false;
        continue;
      case Move::Reverse:
        emit_group(c, t.position(s), t.position(e), h, code);
        return;
      case Move::Split: {
        emit_fwd(t.position(s) + 1, t.position(why.at), code);
        emit(t, c, why.at, e, h, why.held, u - t.held_base(s, why.at, why.held, p), code);
        e = why.at, h = why.held;
        continue;
      }
      case Move::None: return;
    }
  }
}

// The gcd of the tensor sizes but the loss's output (Chain counts it exactly).
uint64_t gcd_of_sizes(const Model& m) {
  uint64_t q = 0;
  for (int v = 0; v < m.size(); ++v) q = std::gcd(q, std::gcd(v == m.loss() ? 0 : m.op(v).bytes, m.grad_bytes(v)));
  return std::max<uint64_t>(q, 1);
}

double cells(double positions, double levels) { return positions * positions / 2 * 4 * (levels + 1); }
double work(double positions, double levels) { return positions * positions * positions / 6 * 8 * (levels + 1); }

// Equal Dense-like layers (each backward reads its input and output), the
// input as large, the loss reading only its input: revolve's count is the
// least of any schedule (tests/strategies/test_revolve.cpp), so no table.
bool uniform_chain(const Model& m) {
  const int n = m.loss();
  if (n < 3) return false;
  const Op& first = m.op(1);
  for (int v = 1; v < n; ++v) {
    const Op& op = m.op(v);
    if (op.bytes != m.op(0).bytes || m.grad_bytes(v) != op.bytes || op.fwd_flops != first.fwd_flops ||
        op.saved != std::vector<int>{v - 1, v})
      return false;
  }
  return m.op(n).bytes == m.op(0).bytes && m.op(n).saved == std::vector<int>{n - 1};
}

// Positions 0 < ... < N-1 splitting the ops 1..N-1 into `count` groups of
// about equal length, each ending at the smallest tensor near its target.
std::vector<int> group_positions(const Model& m, int count) {
  const int last = m.loss() - 1;
  std::vector<int> pos{0};
  for (int j = 1; j < count; ++j) {
    const int target = static_cast<int>(std::llround(static_cast<double>(j) * last / count));
    const int lo = std::max(pos.back() + 1, target - last / (2 * count)), hi = std::min(last - 1, target + last / (2 * count));
    int best = std::clamp(target, pos.back() + 1, last - 1);
    for (int v = lo; v <= hi; ++v)
      if (m.op(v).bytes < m.op(best).bytes) best = v;
    if (best > pos.back() && best < last) pos.push_back(best);
  }
  pos.push_back(last);
  return pos;
}

}  // namespace

NestedPlan plan_nested_chain(const Model& m, uint64_t budget, bool closed_form) {
  NestedPlan plan;
  const int n = m.loss();
  // Room for everything: nothing to recompute, nothing to search.
  std::vector<Instr> store_all;
  for (int v = 1; v <= n; ++v) store_all.push_back({InstrKind::Fwd, v});
  for (int v = n; v >= 1; --v) store_all.push_back({InstrKind::Bwd, v});
  if (simulate(m, with_frees(m, store_all, "store-all")).peak_bytes <= budget) {
    plan.found = plan.proven = true, plan.unit = 1, plan.candidates = n - 1;
    plan.compute = std::move(store_all);
    return plan;
  }
  if (closed_form && uniform_chain(m)) {
    const uint64_t unit = m.op(0).bytes;
    plan.unit = unit, plan.candidates = n - 1, plan.proven = true;
    const auto slots = static_cast<int64_t>(budget / unit) - 4;
    if (slots < 1) return plan;  // five tensors: the input, two layers, two gradients
    plan.compute = revolve_program(n, static_cast<int>(std::min<int64_t>(slots, n)));
    plan.found = true;
    plan.recompute_flops = static_cast<double>(revolve_advances(n - 1, static_cast<int>(std::min<int64_t>(slots, n))) + 2 - n) *
                           m.op(1).fwd_flops;
    return plan;
  }
  plan.unit = gcd_of_sizes(m);
  auto levels = static_cast<int64_t>(budget / plan.unit);
  int positions = n;  // 0..N-1
  double max_work = kMaxWork;
  auto too_big = [&] {
    return cells(positions, static_cast<double>(levels)) > kMaxCells || work(positions, static_cast<double>(levels)) > max_work;
  };
  if (too_big()) {  // count coarser, then group ops until the tables fit the smaller budget
    max_work = kMaxApproxWork;
    if (levels > kCoarseLevels) plan.unit = (budget + kCoarseLevels - 1) / kCoarseLevels;
    levels = static_cast<int64_t>(budget / plan.unit);
    while (positions > 2 && too_big()) positions = positions * 9 / 10;
  }
  const Chain c(m, plan.unit, budget);
  std::vector<int> pos;
  if (positions == n) {
    pos.resize(static_cast<std::size_t>(n));
    std::iota(pos.begin(), pos.end(), 0);
  } else {
    pos = group_positions(m, positions - 1);
  }
  plan.candidates = static_cast<int>(pos.size()) - 1;
  plan.proven = plan.candidates == n - 1 && plan.unit == gcd_of_sizes(m);
  const NestedTables tables(c, std::move(pos), levels);
  const double total = tables.top(0, false, levels);
  if (total == kInf) return plan;
  plan.found = true;
  plan.recompute_flops = total - c.f_sum[static_cast<std::size_t>(n)];
  emit(tables, c, 0, tables.size(), false, false, levels, plan.compute);
  return plan;
}

uint64_t nested_min_budget(const Model& m) {
  uint64_t lo = 0, hi = 0;
  for (int v = 0; v < m.size(); ++v) hi += m.op(v).bytes + m.grad_bytes(v);
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (plan_nested_chain(m, mid).found) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

}  // namespace remat
