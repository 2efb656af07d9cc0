#include "core/strategies/residency_bound.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_facts.h"
#include "core/strategies/mip_matrix.h"

namespace remat {

bool meets_bound(double flops, double bound) { return flops <= bound + 1e-9 * std::max(1.0, bound); }

namespace {

// The relaxation's optimum as a general schedule: the forward pass, then
// before each bwd b the recomputed storages it reads (and aux(b) when b is
// one), with the recomputed inputs they need, in op order, each once: a
// recomputed storage stays until its last read (with_frees), so a later
// stage finds it there. Views follow their owners.
std::vector<Instr> schedule_recomputing(const MilpFacts& x, const std::vector<int>& recomputed) {
  const auto n = static_cast<std::size_t>(x.L) + 1;
  std::vector<char> dropped(n, 0), there(n, 1);
  for (int s : recomputed) dropped[static_cast<std::size_t>(s)] = 1, there[static_cast<std::size_t>(s)] = 0;
  std::vector<Instr> code;
  for (int v = 1; v <= x.L; ++v) code.push_back({InstrKind::Fwd, v});
  for (int b = x.L; b >= 1; --b) {
    std::vector<char> now(n, 0);
    std::vector<int> todo = x.saved[static_cast<std::size_t>(b)];
    if (x.aux[static_cast<std::size_t>(b)] > 0) todo.push_back(x.own[static_cast<std::size_t>(b)]);
    while (!todo.empty()) {
      const auto s = static_cast<std::size_t>(todo.back());
      todo.pop_back();
      if (there[s] || now[s] || !dropped[s]) continue;
      now[s] = 1;
      for (int u : x.in[s]) todo.push_back(u);
    }
    for (int v = 1; v <= b; ++v)
      if (now[static_cast<std::size_t>(x.own[static_cast<std::size_t>(v)])]) code.push_back({InstrKind::Fwd, v});
    for (std::size_t s = 0; s < n; ++s) there[s] |= now[s];
    code.push_back({InstrKind::Bwd, b});
  }
  return code;
}

}  // namespace

std::vector<Instr> residency_schedule(const Model& m, const std::vector<int>& recomputed) {
  const MilpFacts x(m);
  for (int s : recomputed)
    if (s < 1 || s > x.L || !x.owner(s))
      throw std::invalid_argument("residency_schedule: " + std::to_string(s) + " is not a recomputable storage (an op 1.." +
                                  std::to_string(x.L) + " that is not a view)");
  return schedule_recomputing(x, recomputed);
}

#if REMAT_HAVE_MILP

namespace {

constexpr int kNever = std::numeric_limits<int>::max();

// The budget of each forward step's row and each backward step's (index t or b).
struct RowBudgets {
  RowBudgets(int L, uint64_t budget) : forward(static_cast<std::size_t>(L) + 1, budget), backward(forward) {}
  // Each row lowered by its overrun (0: none) where that leaves it above 0;
  // whether any was.
  bool lower(const std::vector<uint64_t>& forward_over, const std::vector<uint64_t>& backward_over) {
    bool lowered = false;
    auto by = [&](std::vector<uint64_t>& rows, const std::vector<uint64_t>& over) {
      for (std::size_t r = 0; r < rows.size(); ++r)
        if (over[r] > 0 && over[r] < rows[r]) rows[r] -= over[r], lowered = true;
    };
    by(forward, forward_over);
    by(backward, backward_over);
    return lowered;
  }
  std::vector<uint64_t> forward, backward;
};

// The covering problem of residency_bound.h, in units of the sizes' gcd.
// Columns, per storage s: d[s] (binary) s is recomputed at least once, at
// fwd_flops(s); h[s] (binary) s is still resident when the forward pass ends.
// Rows:
// - a storage a backward step reads is held to the end of the forward pass
//   unless it is recomputed: h[s] + d[s] >= 1;
// - a recomputation's inputs are resident when it runs, in some backward
//   stage: each input u was held from the forward pass or is recomputed too,
//   d[v] <= h[u] + d[u];
// - memory at every forward step: what a later forward step reads, and each
//   held storage; at every backward step: the gradients, what it reads, its
//   aux, and each storage a later backward step reads unless recomputed; and
//   aux(v) from fwd v to bwd v unless v is recomputed.
// Each step's row has its own budget (RowBudgets): the bound uses the
// budget at every row; the search for a schedule that fits lowers the rows
// of the steps its schedules overrun.
class Relaxation : public MipMatrix {
 public:
  Relaxation(const MilpFacts& x, const RowBudgets& budget) : x_(x), budget_(budget) {
    const auto n = static_cast<std::size_t>(x.L) + 1;
    last_saved_.assign(n, kNever);  // the last backward step (least b) that reads s
    for (int b = 1; b <= x.L; ++b)
      for (int s : x.saved[static_cast<std::size_t>(b)]) last_saved_[static_cast<std::size_t>(s)] = std::min(last_saved_[static_cast<std::size_t>(s)], b);
    for (int v = 0; v <= x.L; ++v)
      unit_ = std::gcd(unit_, std::gcd(std::gcd(x.a[static_cast<std::size_t>(v)], x.aux[static_cast<std::size_t>(v)]),
                                       std::gcd(x.grads[static_cast<std::size_t>(v)], x.new_grads[static_cast<std::size_t>(v)])));
    unit_ = std::max<uint64_t>(unit_, 1);
    for (double f : x.f) fmax_ = std::max(fmax_, f);
    d_.assign(n, -1), h_.assign(n, -1);
    for (int s = 0; s <= x.L; ++s) {
      const auto S = static_cast<std::size_t>(s);
      if (!x.owner(s)) continue;
      if (s >= 1) d_[S] = add_col(0, 1, x.f[S] / fmax_, true);
      // Read by the loss's fwd (or the loss itself): resident to the end anyway.
      if (s < x.L && x.last_read[S] < x.L) h_[S] = add_col(0, 1, 0, true);
    }
    for (int s = 0; s <= x.L; ++s) {
      const auto S = static_cast<std::size_t>(s);
      if (h_[S] >= 0 && last_saved_[S] != kNever) {
        Terms t{{h_[S], 1}};
        term(t, d_[S], 1);
        add_row(t, 'G', 1);
      }
      if (d_[S] < 0) continue;
      for (int u : x.in[S])
        if (u != s && h_[static_cast<std::size_t>(u)] >= 0) {
          Terms t{{d_[S], 1}, {h_[static_cast<std::size_t>(u)], -1}};
          term(t, d_[static_cast<std::size_t>(u)], -1);
          add_row(t, 'L', 0);
        }
    }
    for (int t = 1; t <= x.L; ++t) add_forward(t);
    for (int b = x.L; b >= 1; --b) add_backward(b);
  }

  bool infeasible() const { return infeasible_; }
  double flops_scale() const { return 1 / fmax_; }
  // The storages a solution recomputes, and their forward FLOPs.
  std::vector<int> recomputed(const double* sol) const {
    std::vector<int> out;
    for (int s = 1; s <= x_.L; ++s)
      if (d_[static_cast<std::size_t>(s)] >= 0 && sol[d_[static_cast<std::size_t>(s)]] > 0.5) out.push_back(s);
    return out;
  }

 private:
  // bytes that are resident unless column `gone` is 1 (none: always).
  void unless(int gone, uint64_t bytes) {
    fixed_ += bytes;
    term(terms_, gone, -units(bytes));
  }
  // bytes that are resident when column `held` is 1 (none: never).
  void when(int held, uint64_t bytes) { term(terms_, held, units(bytes)); }
  void close_row(uint64_t budget) {
    const double room = static_cast<double>(budget / unit_) - units(fixed_);
    if (!terms_.empty()) add_row(terms_, 'L', room);
    else if (room < 0) infeasible_ = true;
    terms_.clear(), fixed_ = 0;
  }

  void add_forward(int t) {
    fixed_ = x_.a[static_cast<std::size_t>(t)] + x_.aux[static_cast<std::size_t>(t)];
    for (int u = 0; u < t; ++u) {
      const auto U = static_cast<std::size_t>(u);
      if (x_.aux[U] > 0) unless(d_[static_cast<std::size_t>(x_.own[U])], x_.aux[U]);
      if (!x_.owner(u)) continue;
      if (x_.last_read[U] >= t || h_[U] < 0) fixed_ += x_.a[U];
      else when(h_[U], x_.a[U]);
    }
    close_row(budget_.forward[static_cast<std::size_t>(t)]);
  }

  void add_backward(int b) {
    const auto B = static_cast<std::size_t>(b);
    fixed_ = x_.grads[B] + x_.new_grads[B] + x_.aux[B];
    for (int s : x_.saved[B]) fixed_ += x_.a[static_cast<std::size_t>(s)];
    for (int u = 0; u < b; ++u) {
      const auto U = static_cast<std::size_t>(u);
      if (x_.aux[U] > 0) unless(d_[static_cast<std::size_t>(x_.own[U])], x_.aux[U]);
      if (x_.owner(u) && last_saved_[U] < b && !MilpFacts::contains(x_.saved[B], u)) unless(d_[U], x_.a[U]);
    }
    add_bridges(b);
    close_row(budget_.backward[B]);
  }

  // A recomputed storage v that a later backward step reads is, at bwd b,
  // resident or recomputed after it, from inputs resident then. So along a
  // path of inputs v <- p1 <- ... <- pk whose last storage is never
  // recomputed, one of the path's storages is resident at bwd b (pk at the
  // latest: there since the forward pass), and the row holds at least the
  // least of their bytes when d[v] - d[pk] = 1. Likewise where v has aux
  // and bwd v is still to come: aux(v) is resident at bwd b, or v is
  // recomputed after it (the row holds the lesser of aux(v) and the path's
  // least); without this the program frees a dropout's mask by recomputing
  // it, at no cost for the input held to recompute it from. Counted once:
  // the paths of a row share no storage, and hold none that another term
  // counts (what bwd b reads, or what a later backward step reads: v
  // excepted, whose own term is 0 when d[v] = 1). A path ends at an op
  // costlier than 4 of v (likely never recomputed) or after 6 inputs.
  void add_bridges(int b) {
    const auto B = static_cast<std::size_t>(b);
    std::vector<char> taken(static_cast<std::size_t>(x_.L) + 1, 0);
    auto counted = [&](int s) { return MilpFacts::contains(x_.saved[B], s) || last_saved_[static_cast<std::size_t>(s)] < b; };
    for (int v = b - 1; v >= 1; --v) {
      const auto V = static_cast<std::size_t>(v);
      const bool read_later = last_saved_[V] < b;
      if (!x_.owner(v) || d_[V] < 0 || (!read_later && x_.aux[V] == 0) || MilpFacts::contains(x_.saved[B], v) || taken[V]) continue;
      std::vector<int> path{v};
      uint64_t least = read_later ? x_.a[V] : std::min(x_.a[V], x_.aux[V]);
      for (int at = v; path.size() <= 6;) {
        int next = -1;
        for (int u : x_.in[static_cast<std::size_t>(at)]) {
          const auto U = static_cast<std::size_t>(u);
          if (u == at || taken[U] || counted(u) || MilpFacts::contains(path, u)) continue;
          if (next < 0 || x_.a[U] > x_.a[static_cast<std::size_t>(next)]) next = u;
        }
        if (next < 0) break;
        path.push_back(next), at = next;
        least = std::min(least, x_.a[static_cast<std::size_t>(next)]);
        if (x_.f[static_cast<std::size_t>(next)] > 4 * x_.f[V]) break;
      }
      if (path.size() < 2 || least == 0) continue;
      for (int p : path) taken[static_cast<std::size_t>(p)] = 1;
      const int z = bridge(v, path.back());
      term(terms_, z, units(least));
      // A storage p inside the path whose aux this row counts unless d[p]:
      // recomputed (d[p] = 1) with pk not, aux(p) or one of p..pk is
      // resident, unless the path's own term already holds (the row then
      // counts the cheaper of the two).
      uint64_t tail = x_.a[static_cast<std::size_t>(path.back())];
      for (std::size_t i = path.size() - 1; i-- > 1;) {
        const auto P = static_cast<std::size_t>(path[i]);
        tail = std::min(tail, x_.a[P]);
        if (x_.aux[P] > 0 && d_[P] >= 0) term(terms_, aux_bridge(z, path[i], path.back()), units(std::min(x_.aux[P], tail)));
      }
    }
  }

  // y >= d[p] - d[end] - z, continuous.
  int aux_bridge(int z, int p, int end) {
    const auto key = std::tuple{z, p, end};
    if (const auto at = aux_bridges_.find(key); at != aux_bridges_.end()) return at->second;
    const int y = add_col(0, 1, 0, false);
    Terms t{{y, 1}, {z, 1}, {d_[static_cast<std::size_t>(p)], -1}};
    term(t, d_[static_cast<std::size_t>(end)], 1);
    add_row(t, 'G', 0);
    return aux_bridges_[key] = y;
  }

  // z >= d[v] - d[end], continuous: the least value is the true one.
  int bridge(int v, int end) {
    const auto key = std::pair{v, end};
    if (const auto at = bridges_.find(key); at != bridges_.end()) return at->second;
    const int z = add_col(0, 1, 0, false);
    Terms t{{z, 1}, {d_[static_cast<std::size_t>(v)], -1}};
    term(t, d_[static_cast<std::size_t>(end)], 1);
    add_row(t, 'G', 0);
    return bridges_[key] = z;
  }

  double units(uint64_t bytes) const { return static_cast<double>(bytes) / static_cast<double>(unit_); }

  const MilpFacts& x_;
  const RowBudgets& budget_;
  uint64_t unit_ = 0;
  double fmax_ = 1;
  std::vector<int> last_saved_, d_, h_;
  std::map<std::pair<int, int>, int> bridges_;
  std::map<std::tuple<int, int, int>, int> aux_bridges_;
  Terms terms_;
  uint64_t fixed_ = 0;
  bool infeasible_ = false;
};

}  // namespace

namespace {

struct Solution {
  ResidencyBound::Status status = ResidencyBound::Status::TimeLimit;
  double bound = 0;
  bool found = false;           // `recomputed` is a solution of the program
  std::vector<int> recomputed;  // the storages it recomputes
  int binaries = 0, rows = 0;
  int64_t nonzeros = 0;
};

Solution solve(const MilpFacts& x, const RowBudgets& row_budget, double seconds) {
  using St = ResidencyBound::Status;
  Solution out;
  const Relaxation form(x, row_budget);
  out.binaries = form.binaries(), out.rows = form.rows(), out.nonzeros = form.nonzeros();
  if (form.infeasible()) return out.status = St::Infeasible, out;
  if (out.nonzeros > kResidencyNonzeros) return out.status = St::TooLarge, out;
  if (form.binaries() == 0) return out.status = St::Solved, out.found = true, out;  // nothing to choose
  Cbc_Model* model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  form.load(model);
  Cbc_setAllowableGap(model, 0);
  Cbc_setAllowableFractionGap(model, 0);
  Cbc_setMaximumSeconds(model, std::max(0.05, seconds));
  Cbc_setParameter(model, "timeMode", "elapsed");
  Cbc_solve(model);
  const bool finished = Cbc_status(model) == 0 && !Cbc_isSecondsLimitReached(model);
  if (const double* sol = Cbc_bestSolution(model)) out.found = true, out.recomputed = form.recomputed(sol);
  if (finished && Cbc_isProvenInfeasible(model)) {
    out.status = St::Infeasible, out.found = false;
  } else if (finished && Cbc_isProvenOptimal(model) && out.found) {
    // The optimum's own FLOPs, summed unscaled: the bound to the last bit.
    out.status = St::Solved;
    for (int s : out.recomputed) out.bound += x.f[static_cast<std::size_t>(s)];
  } else {
    out.bound = std::max(0.0, Cbc_getBestPossibleObjValue(model) / form.flops_scale());
  }
  Cbc_deleteModel(model);
  return out;
}

// Lowers the row of each step whose stage of `full` (its instructions up to
// and with that fwd in the first pass, or up to and with that bwd) peaks over
// the budget, by the overrun. False when none can be lowered so far.
bool lower_overrun_rows(const MilpFacts& x, const Schedule& full, const Simulation& sim, uint64_t budget, RowBudgets& rows) {
  const auto n = static_cast<std::size_t>(x.L) + 1;
  std::vector<uint64_t> forward(n, 0), backward(n, 0);
  auto over = [&](std::vector<uint64_t>& row, int step, std::size_t i) {
    if (sim.timeline[i] > budget) row[static_cast<std::size_t>(step)] = std::max(row[static_cast<std::size_t>(step)], sim.timeline[i] - budget);
  };
  // The forward pass ends at the first bwd (residency_schedule's order).
  const auto first_bwd = static_cast<std::size_t>(
      std::find_if(full.code.begin(), full.code.end(), [](const Instr& i) { return i.kind == InstrKind::Bwd; }) - full.code.begin());
  for (std::size_t i = 0, t = 0; i < first_bwd; ++i) {
    if (full.code[i].kind == InstrKind::Fwd) t = static_cast<std::size_t>(full.code[i].op);
    if (t > 0) over(forward, static_cast<int>(t), i);
  }
  // After it, backwards through the code: an instruction belongs to the next bwd.
  for (std::size_t i = full.code.size(), b = 0; i-- > first_bwd;) {
    if (full.code[i].kind == InstrKind::Bwd) b = static_cast<std::size_t>(full.code[i].op);
    if (b > 0) over(backward, static_cast<int>(b), i);
  }
  return rows.lower(forward, backward);
}

// A fitting schedule may recompute a storage that fits resident after all
// (the lowered rows are only an estimate): each, costliest first, is kept
// instead where the schedule still fits and recomputes less, until none is
// or `in_time` says the time limit has passed (a simulation per try).
template <class InTime>
void keep_what_fits(const Model& m, const MilpFacts& x, uint64_t budget, std::vector<int> recomputed, ResidencyBound& out,
                    InTime in_time) {
  SimulateOptions figures;
  figures.timeline = false;
  std::sort(recomputed.begin(), recomputed.end(), [&](int a, int b) { return x.f[static_cast<std::size_t>(a)] > x.f[static_cast<std::size_t>(b)]; });
  for (bool kept = true; kept;) {
    kept = false;
    for (std::size_t i = 0; i < recomputed.size() && in_time();) {
      std::vector<int> fewer = recomputed;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
      std::vector<Instr> compute = schedule_recomputing(x, fewer);
      const Simulation sim = simulate(m, with_frees(m, compute, "residency"), figures);
      if (sim.peak_bytes > budget || sim.recompute_flops >= out.recompute_flops) {
        ++i;
        continue;
      }
      recomputed = std::move(fewer), kept = true;  // the next one moved to i
      out.compute = std::move(compute), out.recompute_flops = sim.recompute_flops, out.peak = sim.peak_bytes;
    }
  }
}
}  // namespace

ResidencyBound residency_bound(const Model& m, uint64_t budget, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto left = [&] { return seconds - std::chrono::duration<double>(Clock::now() - start).count(); };
  ResidencyBound out;
  // Over 2,000 ops it is certainly too large (a chain's rows alone hold a
  // term per op before each step): not even built.
  if (m.loss() > 2000) {
    out.status = ResidencyBound::Status::TooLarge;
    out.note = std::to_string(m.loss()) + " ops";
    return out;
  }
  const MilpFacts x(m);
  Solution s = solve(x, RowBudgets(x.L, budget), 0.6 * seconds);
  out.status = s.status, out.bound = s.bound, out.binaries = s.binaries, out.rows = s.rows, out.nonzeros = s.nonzeros;
  if (s.status == ResidencyBound::Status::TooLarge) {
    out.note = std::to_string(s.nonzeros) + " nonzeros, over " + std::to_string(kResidencyNonzeros);
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
  }
  if (s.status == ResidencyBound::Status::Solved) out.recomputed = s.recomputed;
  // Schedules from its solutions: at the budget, then, while the schedule
  // overruns it (memory the relaxation leaves out: what stays for later
  // recomputation during the backward pass, and what recomputation itself
  // holds), with the rows of the steps it overran lowered by the overrun.
  // Only a schedule, not the bound: the first solve alone is that.
  RowBudgets rows(x.L, budget);
  std::vector<int> best;   // the fitting schedule's recomputed storages
  std::vector<int> tried;  // the choice of the round before
  for (int round = 0; round < 16 && s.found; ++round) {
    std::vector<Instr> compute = schedule_recomputing(x, s.recomputed);
    const Schedule full = with_frees(m, compute, "residency");
    const Simulation sim = simulate(m, full);
    const bool fits = sim.peak_bytes <= budget;
    if (round == 0 || (fits && (!out.fits || sim.recompute_flops < out.recompute_flops))) {
      out.compute = std::move(compute), out.fits = fits, out.recompute_flops = sim.recompute_flops, out.peak = sim.peak_bytes;
      if (fits) best = s.recomputed;
    }
    if (fits || left() < 0.05) break;
    // Where lowering its steps' rows brought back the same choice, the
    // overrun is not in those rows: every row is lowered by it instead.
    if (s.recomputed == tried || !lower_overrun_rows(x, full, sim, budget, rows)) {
      const std::vector<uint64_t> over(rows.forward.size(), sim.peak_bytes - budget);
      if (!rows.lower(over, over)) break;
    }
    tried = s.recomputed;
    s = solve(x, rows, left());
  }
  if (out.fits) keep_what_fits(m, x, budget, best, out, [&] { return left() > 0; });
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

#else

ResidencyBound residency_bound(const Model&, uint64_t, double) { return {}; }

#endif

}  // namespace remat
