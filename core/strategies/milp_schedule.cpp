#include "core/strategies/milp_schedule.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_facts.h"
#include "core/strategies/mip_matrix.h"


namespace remat {
namespace {

using Facts = MilpFacts;

// The decisions: R[b][v] recompute A(v) in stage b, S[b][u] A(u) resident
// when stage b starts (S[L]: kept from the forward pass). Index 0 of R and S
// is stage 0: nothing after bwd 1.
struct Decisions {
  std::vector<std::vector<char>> R, S;
  explicit Decisions(int L)
      : R(static_cast<std::size_t>(L) + 1, std::vector<char>(static_cast<std::size_t>(L) + 1, 0)),
        S(static_cast<std::size_t>(L) + 1, std::vector<char>(static_cast<std::size_t>(L) + 1, 0)) {}
  bool r(int b, int v) const { return R[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] != 0; }
  bool s(int b, int u) const { return b >= 1 && S[static_cast<std::size_t>(b)][static_cast<std::size_t>(u)] != 0; }
};

std::vector<Instr> compose(const Facts& x, const Decisions& d) {
  std::vector<Instr> code;
  for (int v = 1; v <= x.L; ++v) code.push_back({InstrKind::Fwd, v});
  for (int b = x.L; b >= 1; --b) {
    for (int v = 1; v <= b; ++v)
      if (d.r(b, x.own[static_cast<std::size_t>(v)])) code.push_back({InstrKind::Fwd, v});
    code.push_back({InstrKind::Bwd, b});
  }
  return code;
}

// R and S of a program of the family; false when it is not one.
bool decompose(const Model& m, const Facts& x, const std::vector<Instr>& compute, Decisions& d) {
  std::size_t i = 0;
  for (int v = 1; v <= x.L; ++v, ++i)
    if (i >= compute.size() || !(compute[i] == Instr{InstrKind::Fwd, v})) return false;
  Decisions all(x.L);  // every op's recomputations, views included
  int b = x.L, last = 0;
  for (; i < compute.size(); ++i) {
    const Instr ins = compute[i];
    if (ins.kind == InstrKind::Bwd) {
      if (ins.op != b) return false;
      --b, last = 0;
    } else if (ins.kind == InstrKind::Fwd) {
      if (b < 1 || ins.op <= last || ins.op > b) return false;
      all.R[static_cast<std::size_t>(b)][static_cast<std::size_t>(ins.op)] = 1, last = ins.op;
    } else {
      return false;
    }
  }
  if (b != 0) return false;
  // In the family a view is recomputed exactly when its owner is. Other
  // programs (the checkpoint-set generator's) re-create a view alone when its
  // storage is resident, or skip one nobody reads: views own no bytes and cost
  // nothing, so the program with each view following its owner has the same
  // memory and FLOPs, and that is the one decomposed.
  for (int st = 1; st <= x.L; ++st)
    for (int v = 1; v <= st; ++v)
      all.R[static_cast<std::size_t>(st)][static_cast<std::size_t>(v)] = all.r(st, x.own[static_cast<std::size_t>(v)]);
  d.R = all.R;
  // S: replay the schedule with its frees; a stage starts at the first
  // instruction that is not a free after the forward pass, and after each bwd.
  const Schedule s = with_frees(m, compose(x, d), "milp");
  ResidentSet r(m);
  int fwds = 0, pending = -1;
  for (const Instr ins : s.code) {
    const bool free = ins.kind == InstrKind::FreeAct || ins.kind == InstrKind::FreeGrad || ins.kind == InstrKind::FreeAux;
    if (!free && pending >= 1) {
      for (int u = 0; u <= pending; ++u)
        if (x.owner(u)) d.S[static_cast<std::size_t>(pending)][static_cast<std::size_t>(u)] = r.holders[static_cast<std::size_t>(u)] > 0;
      pending = -1;
    }
    r.apply(m, ins);
    if (ins.kind == InstrKind::Fwd && ++fwds == x.L) pending = x.L;
    if (ins.kind == InstrKind::Bwd) pending = ins.op - 1;
  }
  return true;
}

// Whether op v's fwd runs in stage b (a view's with its owner's).
bool fires(const Facts& x, const Decisions& d, int b, int v) { return v <= b && d.r(b, x.own[static_cast<std::size_t>(v)]); }

// Whether aux(v) made before stage b is still resident in it: no computation
// of v in stages b..v (with_frees frees the aux of all but the last).
bool aux_kept(const Decisions& d, int b, int v) {
  for (int c = v; c <= b; ++c)
    if (d.r(c, v)) return false;
  return true;
}

// Whether storage u is read after op v's fwd in stage b (or kept beyond it).
bool read_after(const Facts& x, const Decisions& d, int b, int v, int u) {
  if (x.saved_by(b, u) || d.s(b - 1, u)) return true;
  for (int w : x.readers[static_cast<std::size_t>(u)])
    if (w > v && fires(x, d, b, w)) return true;
  return false;
}

// The formulation's memory for decisions that satisfy its constraints: each
// instruction's resident bytes, a storage freed after its last read in a
// stage (or at once when nothing reads it).
uint64_t accounted_peak(const Facts& x, const Decisions& d) {
  uint64_t peak = 0;
  for (int t = 1; t <= x.L; ++t) {  // the forward pass
    const auto T = static_cast<std::size_t>(t);
    uint64_t mem = x.a[T] + x.aux[T];
    for (int u = 0; u < t; ++u) {
      const auto U = static_cast<std::size_t>(u);
      if (x.owner(u) && (x.last_read[U] >= t || d.s(x.L, u))) mem += x.a[U];
      if (x.aux[U] > 0 && aux_kept(d, x.L, u)) mem += x.aux[U];
    }
    peak = std::max(peak, mem);
  }
  for (int b = x.L; b >= 1; --b) {
    uint64_t cur = x.grads[static_cast<std::size_t>(b)];
    for (int u = 0; u <= b; ++u) {
      const auto U = static_cast<std::size_t>(u);
      if (x.owner(u) && d.s(b, u)) cur += x.a[U];
      if (x.aux[U] > 0 && aux_kept(d, b, u)) cur += x.aux[U];
    }
    for (int v = 1; v <= b; ++v) {
      if (!fires(x, d, b, v)) continue;
      const auto V = static_cast<std::size_t>(v);
      cur += x.a[V];
      peak = std::max(peak, cur + x.aux[V]);
      if (v == b || aux_kept(d, b - 1, v)) cur += x.aux[V];
      std::vector<int> dropped = x.in[V];
      if (x.owner(v)) dropped.push_back(v);
      for (int u : dropped)
        if (!read_after(x, d, b, v, u)) cur -= x.a[static_cast<std::size_t>(u)];
    }
    peak = std::max(peak, cur + x.new_grads[static_cast<std::size_t>(b)]);
  }
  return peak;
}

double recompute_flops(const Facts& x, const Decisions& d) {
  double f = 0;
  for (int b = 1; b <= x.L; ++b)
    for (int v = 1; v <= b; ++v)
      if (fires(x, d, b, v)) f += x.f[static_cast<std::size_t>(v)];
  return f;
}

}  // namespace

uint64_t milp_accounted_peak(const Model& m, const std::vector<Instr>& compute) {
  const Facts x(m);
  Decisions d(x.L);
  if (!decompose(m, x, compute, d)) throw std::invalid_argument("milp_accounted_peak: not a program of the MILP's family");
  return accounted_peak(x, d);
}

#if REMAT_HAVE_MILP

std::string milp_solver_name() { return std::string("CBC ") + Cbc_getVersion(); }

namespace {

// The formulation in docs/strategies.md, built once; CBC gets it whole.
class Formulation : public MipMatrix {
 public:
  Formulation(const Facts& x, uint64_t budget) : x_(x), budget_(budget) {
    const auto n = static_cast<std::size_t>(x.L) + 1;
    R_.assign(n, std::vector<int>(n, -1)), S_.assign(n, std::vector<int>(n, -1)), Z_.assign(n + 1, std::vector<int>(n, -1));
    unit_ = 0;
    for (int v = 0; v <= x.L; ++v)
      unit_ = std::gcd(unit_, std::gcd(std::gcd(x.a[static_cast<std::size_t>(v)], x.aux[static_cast<std::size_t>(v)]),
                                       std::gcd(x.grads[static_cast<std::size_t>(v)], x.new_grads[static_cast<std::size_t>(v)])));
    unit_ = std::max<uint64_t>(unit_, 1);
    double fmax = 1;
    for (double f : x.f) fmax = std::max(fmax, f);
    flops_scale_ = 1.0 / fmax;
    for (int b = 1; b <= x.L; ++b)
      for (int v = 0; v <= b; ++v) {
        if (!x.useful(b, v)) continue;
        S_[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] = add_col(0, 1, 0, true);
        if (v >= 1) R_[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] = add_col(0, 1, x.f[static_cast<std::size_t>(v)] * flops_scale_, true);
      }
    add_aux_kept();
    for (int b = 1; b <= x.L; ++b) add_stage(b);
    add_forward();
    add_origin_cuts();
  }

  int R(int b, int v) const { return b < 1 ? -1 : R_[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)]; }
  int S(int b, int u) const { return b < 1 ? -1 : S_[static_cast<std::size_t>(b)][static_cast<std::size_t>(u)]; }
  double flops_scale() const { return flops_scale_; }

  Decisions read(const double* sol) const {
    Decisions d(x_.L);
    for (int b = 1; b <= x_.L; ++b)
      for (int v = 0; v <= b; ++v) {
        if (R(b, v) >= 0) d.R[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] = sol[R(b, v)] > 0.5;
        if (S(b, v) >= 0) d.S[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] = sol[S(b, v)] > 0.5;
      }
    return d;
  }

 private:
  // Op v's fwd in stage b: a view's is its owner's decision.
  int fires(int b, int v) const { return v <= b ? R(b, x_.own[static_cast<std::size_t>(v)]) : -1; }

  double units(uint64_t bytes) const { return static_cast<double>(bytes) / static_cast<double>(unit_); }
  // Memory rows are in units of the sizes' gcd: small integer coefficients.
  double budget_units() const { return static_cast<double>(budget_ / unit_); }

  // Z[b][v] >= 1 when aux(v) made before stage b is still resident in it (no
  // computation of v in stages b..v): Z[b] >= Z[b-1] - R[b][v], Z[v-1] = 1.
  // Only memory rows read Z, so its least value is the true one.
  void add_aux_kept() {
    for (int v = 1; v <= x_.L; ++v) {
      if (x_.aux[static_cast<std::size_t>(v)] == 0) continue;
      int prev = -1;
      for (int b = v; b <= x_.L; ++b) {
        const int z = Z_[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)] = add_col(0, 1, 0, false);
        Terms t{{z, 1}};
        term(t, R(b, v), 1);
        if (prev >= 0) t.emplace_back(prev, -1);
        add_row(t, 'G', prev >= 0 ? 0 : 1);
        prev = z;
      }
    }
  }
  int Z(int b, int v) const { return Z_[static_cast<std::size_t>(b)][static_cast<std::size_t>(v)]; }

  // Whether nothing but an op's own views reads storage s: then computing or
  // keeping it needs a reader in this stage, a backward that saves it, or
  // keeping it for the next stage (ops with aux excepted: recomputed for it).
  void needs_a_reader(int b, int s, int col) {
    if (x_.saved_by(b, s)) return;
    Terms t{{col, 1}};
    for (int w : x_.readers[static_cast<std::size_t>(s)])
      if (w <= b && x_.own[static_cast<std::size_t>(w)] != s) term(t, R(b, w), -1);
    term(t, S(b - 1, s), -1);
    add_row(t, 'L', 0);
  }

  void add_stage(int b) {
    const auto B = static_cast<std::size_t>(b);
    for (int v = 1; v <= b; ++v) {
      const int r = R(b, v);
      if (r < 0) continue;
      for (int u : x_.in[static_cast<std::size_t>(v)]) {  // inputs resident: recomputed before, or kept
        Terms t{{r, 1}};
        term(t, R(b, u), -1), term(t, S(b, u), -1);
        add_row(t, 'L', 0);
      }
      Terms both{{r, 1}};  // never recompute a resident storage
      term(both, S(b, v), 1);
      add_row(both, 'L', 1);
      if (x_.aux[static_cast<std::size_t>(v)] == 0) needs_a_reader(b, v, r);
    }
    for (int u : x_.saved[B]) {  // what bwd b reads is resident
      Terms t;
      term(t, R(b, u), 1), term(t, S(b, u), 1);
      add_row(t, 'G', 1);
    }
    for (int u = 0; u <= b; ++u) {
      const int s = S(b, u);
      if (s < 0) continue;
      if (b < x_.L) {  // resident at a stage's start: it was at the previous one's, or recomputed there
        Terms t{{s, 1}};
        term(t, S(b + 1, u), -1), term(t, R(b + 1, u), -1);
        add_row(t, 'L', 0);
      }
      needs_a_reader(b, u, s);
    }
    // Memory: U after each fwd and its frees; a free column is 1 only where
    // the storage is read no more (it may be 0 there: memory over-counted,
    // never under).
    int prev = add_col(0, 1e30, 0, false);
    {
      Terms t{{prev, 1}};
      for (int u = 0; u <= b; ++u) {
        term(t, S(b, u), -units(x_.a[static_cast<std::size_t>(u)]));
        if (x_.aux[static_cast<std::size_t>(u)] > 0) term(t, Z(b, u), -units(x_.aux[static_cast<std::size_t>(u)]));
      }
      add_row(t, 'E', units(x_.grads[B]));
    }
    for (int v = 1; v <= b; ++v) {
      const int r = fires(b, v);
      if (r < 0) continue;
      const auto V = static_cast<std::size_t>(v);
      const double a = units(x_.a[V]), aux = units(x_.aux[V]);
      if (a + aux > 0) add_row({{prev, 1}, {r, a + aux}}, 'L', budget_units());
      const int next = add_col(0, 1e30, 0, false);
      Terms t{{next, 1}, {prev, -1}, {r, -a}};
      if (aux > 0 && v == b) {
        t.emplace_back(r, -aux);
      } else if (aux > 0) {  // kept after fwd v: no later computation before bwd v
        const int keep = add_col(0, 1, 0, false);
        add_row({{keep, 1}, {r, -1}, {Z(b - 1, v), -1}}, 'G', -1);
        t.emplace_back(keep, -aux);
      }
      std::vector<int> dropped = x_.in[V];
      if (x_.owner(v)) dropped.push_back(v);
      for (int u : dropped) {
        if (x_.saved_by(b, u)) continue;  // read by bwd b: freed after it
        const int free = add_col(0, 1, 0, false);
        t.emplace_back(free, units(x_.a[static_cast<std::size_t>(u)]));
        add_row({{free, 1}, {r, -1}}, 'L', 0);
        if (const int keep = S(b - 1, u); keep >= 0) add_row({{free, 1}, {keep, 1}}, 'L', 1);
        for (int w : x_.readers[static_cast<std::size_t>(u)])
          if (w > v && fires(b, w) >= 0) add_row({{free, 1}, {fires(b, w), 1}}, 'L', 1);
      }
      add_row(t, 'E', 0);
      prev = next;
    }
    add_row({{prev, 1}}, 'L', budget_units() - units(x_.new_grads[B]));
  }

  // Valid inequalities that the LP relaxation needs (they cut off no
  // schedule): a storage v resident when stage c starts was kept from the
  // forward pass, or computed in a stage b > c, where each input u was
  // resident: recomputed there, or kept from the forward pass or from a
  // recomputation in a stage after b. So for each input u of v
  //   S[c][v] <= S[L][v] + S[L][u] + sum over b > c of R[b][u].
  // Without them the LP recomputes v a little in each of many stages, each
  // time from the same small fraction of u kept from the forward pass: on
  // transformer:2 it dropped every residual sum for 1/6 of the best
  // schedule's FLOPs. P[c][u] holds the right-hand side's part in u.
  void add_origin_cuts() {
    const auto n = static_cast<std::size_t>(x_.L) + 1;
    std::vector<std::vector<int>> P(n, std::vector<int>(n, -1));
    auto origin = [&](int c, int u) {  // P[c][u] = S[L][u] + sum over b > c of R[b][u], built on demand
      int& col = P[static_cast<std::size_t>(c)][static_cast<std::size_t>(u)];
      if (col >= 0 || c >= x_.L) return c >= x_.L ? S(x_.L, u) : col;
      const int later = c + 1 >= x_.L ? S(x_.L, u) : P[static_cast<std::size_t>(c + 1)][static_cast<std::size_t>(u)];
      col = add_col(0, 1e30, 0, false);
      Terms t{{col, 1}};
      term(t, later, -1), term(t, R(c + 1, u), -1);
      add_row(t, 'E', 0);
      return col;
    };
    for (int c = x_.L - 1; c >= 1; --c)
      for (int v = 1; v <= c; ++v) {
        const int s = S(c, v);
        if (s < 0) continue;
        for (int u : x_.in[static_cast<std::size_t>(v)]) {
          if (u == v) continue;
          for (int b = x_.L - 1; b >= c; --b) origin(b, u);  // the chain above c exists
          Terms t{{s, 1}};
          term(t, S(x_.L, v), -1), term(t, origin(c, u), -1);
          add_row(t, 'L', 0);
        }
      }
  }

  void add_forward() {
    for (int t = 1; t <= x_.L; ++t) {
      const auto T = static_cast<std::size_t>(t);
      double fixed = units(x_.a[T] + x_.aux[T]);
      Terms terms;
      for (int u = 0; u < t; ++u) {
        const auto U = static_cast<std::size_t>(u);
        if (x_.aux[U] > 0) term(terms, Z(x_.L, u), units(x_.aux[U]));
        if (!x_.owner(u)) continue;
        if (x_.last_read[U] >= t) fixed += units(x_.a[U]);
        else term(terms, S(x_.L, u), units(x_.a[U]));
      }
      if (!terms.empty()) add_row(terms, 'L', budget_units() - fixed);
      else if (fixed > budget_units()) add_row({{add_col(0, 0, 0, false), 1}}, 'G', 1);  // infeasible, said once
    }
  }

  const Facts& x_;
  uint64_t budget_, unit_ = 1;
  double flops_scale_ = 1;
  std::vector<std::vector<int>> R_, S_, Z_;
};

// The (stage, op) pairs of a model: every one has a decision or a row in
// practice, so more of them than the nonzeros allowed is too large without
// building the formulation (whose Facts alone take time quadratic in the ops).
double stage_pairs(const Model& m) { return 0.5 * m.loss() * (m.loss() + 1.0); }

std::string with_commas(double x) {
  std::string digits = std::to_string(static_cast<long long>(x)), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string too_large(double nonzeros, double seconds, bool estimated) {
  const double most = milp_nonzeros_allowed(seconds);
  if (nonzeros <= most) return "";
  return (estimated ? "at least " : "") + with_commas(nonzeros) + " nonzeros, over the " + with_commas(most) +
         " its solver's first LP gets done in " + std::to_string(static_cast<long long>(seconds + 0.5)) + " s";
}

}  // namespace

double milp_nonzeros_allowed(double seconds) { return kMilpNonzerosIn45Seconds * std::sqrt(std::max(0.0, seconds) / 45); }

std::string milp_too_large(const Model& m, uint64_t budget, double seconds) {
  if (std::string why = too_large(stage_pairs(m), seconds, true); !why.empty()) return why;
  const Facts x(m);
  const Formulation form(x, budget);
  return too_large(static_cast<double>(form.nonzeros()), seconds, false);
}

MilpResult solve_milp(const Model& m, uint64_t budget, double seconds, const std::vector<Instr>* warm_start) {
  MilpResult out;
  if (std::string why = too_large(stage_pairs(m), seconds, true); !why.empty()) {
    out.status = MilpResult::Status::TooLarge, out.note = why;
    return out;
  }
  const auto start = std::chrono::steady_clock::now();
  const Facts x(m);
  const Formulation form(x, budget);
  out.binaries = form.binaries(), out.rows = form.rows(), out.columns = form.columns(), out.nonzeros = form.nonzeros();
  if (std::string why = too_large(static_cast<double>(out.nonzeros), seconds, false); !why.empty()) {
    out.status = MilpResult::Status::TooLarge, out.note = why;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  Cbc_Model* model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  form.load(model);
  if (warm_start) {
    Decisions d(x.L);
    if (decompose(m, x, *warm_start, d) && accounted_peak(x, d) <= budget) {
      std::vector<int> cols;
      std::vector<double> values;
      for (int b = 1; b <= x.L; ++b)
        for (int v = 0; v <= b; ++v) {
          if (form.R(b, v) >= 0) cols.push_back(form.R(b, v)), values.push_back(d.r(b, v));
          if (form.S(b, v) >= 0) cols.push_back(form.S(b, v)), values.push_back(d.s(b, v));
        }
      Cbc_setMIPStartI(model, static_cast<int>(cols.size()), cols.data(), values.data());
      out.warm_started = true;
    }
  }
  Cbc_setMaximumSeconds(model, std::max(0.1, seconds));
  Cbc_setParameter(model, "timeMode", "elapsed");  // the user's SECONDS are on the wall clock
  Cbc_solve(model);
  const double* sol = Cbc_bestSolution(model);
  // Only a search that finished proves anything: stopped by the time limit
  // inside its preprocessing, CBC 2.10 has answered "proven infeasible" for a
  // feasible transformer:6 at 80% of store-all's peak (seen once, not twice).
  const bool finished = Cbc_status(model) == 0 && !Cbc_isSecondsLimitReached(model);
  const bool proven = finished && Cbc_isProvenOptimal(model) != 0;
  if (finished && Cbc_isProvenInfeasible(model)) {
    out.status = MilpResult::Status::Infeasible;
  } else if (!sol) {
    out.status = MilpResult::Status::NoSolution;
  } else {
    const Decisions d = form.read(sol);
    out.compute = compose(x, d);
    out.recompute_flops = recompute_flops(x, d);
    out.peak = accounted_peak(x, d);
    out.bound = std::max(0.0, Cbc_getBestPossibleObjValue(model) / form.flops_scale());
    out.status = proven ? MilpResult::Status::Optimal : MilpResult::Status::Feasible;
    if (proven) out.bound = out.recompute_flops;
    out.gap = out.recompute_flops > 0 ? std::max(0.0, (out.recompute_flops - out.bound) / out.recompute_flops) : 0.0;
    const double step = m.forward_flops() + m.backward_flops() + out.recompute_flops;
    out.step_gap = step > 0 ? std::max(0.0, (out.recompute_flops - out.bound) / step) : 0.0;
  }
  Cbc_deleteModel(model);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

#else

std::string milp_solver_name() { return ""; }

MilpResult solve_milp(const Model&, uint64_t, double, const std::vector<Instr>*) { return {}; }

std::string milp_too_large(const Model&, uint64_t, double) { return ""; }

#endif

}  // namespace remat
