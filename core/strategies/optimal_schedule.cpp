#include "core/strategies/optimal_schedule.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "core/base/cancel_scope.h"
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/dtr.h"
#include "core/strategies/factories.h"
#include "core/strategies/first_step_bound.h"
#include "core/strategies/registry.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(double s) { return std::to_string(static_cast<long long>(s + 0.5)) + " s"; }

// (flops - bound) over the recompute FLOPs, and over the whole step's.
std::pair<double, double> gaps(const Model& m, double flops, double bound) {
  const double d = std::max(0.0, flops - bound), step = m.forward_flops() + m.backward_flops() + flops;
  return {flops > 0 && !meets_bound(flops, bound) ? d / flops : 0.0, step > 0 && !meets_bound(flops, bound) ? d / step : 0.0};
}

// What the record says about its schedule against its bound: the ratio and
// both as overheads (over one forward plus one backward pass).
void compare_to_bound(const Model& m, SolverRecord& r) {
  if (r.recompute_flops < 0 || r.bound < 0) return;
  const double pass = m.forward_flops() + m.backward_flops();
  if (pass > 0) r.overhead = r.recompute_flops / pass, r.bound_overhead = r.bound / pass;
  if (meets_bound(r.recompute_flops, r.bound)) r.ratio = 1;
  else if (r.bound > 0) r.ratio = r.recompute_flops / r.bound;
}

std::string ratio_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x < 10 ? "%.2fx" : "%.0fx", x);
  return buf;
}

std::string percent2(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * x);
  return buf;
}

std::vector<Instr> compute_part(const Schedule& s) {
  std::vector<Instr> code;
  for (const Instr& i : s.code)
    if (i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd) code.push_back(i);
  return code;
}

class Optimal final : public Strategy {
 public:
  Optimal(uint64_t budget, double limit) : budget_(budget), limit_(limit) {}
  std::string name() const override {
    return "optimal:" + std::to_string(budget_) +
           (limit_ == kOptimalDefaultSeconds ? "" : ":" + std::to_string(static_cast<long long>(limit_)));
  }
  Schedule schedule(const Model& m) const override {
    std::vector<SolverRecord> ignored;
    return schedule_with_record(m, ignored);
  }
  Schedule schedule_with_record(const Model& m, std::vector<SolverRecord>& records) const override {
    const OptimalOutcome o = optimal_schedule(m, budget_, limit_);
    records.insert(records.end(), o.records.begin(), o.records.end());
    if (!o.found) throw InputError(o.infeasible);
    Schedule s = with_frees(m, o.compute, name());
    s.note = o.note;
    return s;
  }

  // An upper bound: what the searches return is not known before they run.
  // Every set the branch and bound tries is a segment schedule (bounded by
  // the longest); the MILP's schedules (where it is attempted) are the
  // forward pass, then before each bwd b at most the b ops up to it:
  // L + L(L+1)/2 forward steps for the loss L, each of an op with aux(v) when
  // the model has any.
  // The registered strategies it tries (best_named) are held to the same
  // bound: only those not longer are tried.
  ScheduleSize size(const Model& m, uint64_t) const override {
    return {optimal_length_bound(m, budget_, limit_), ScheduleSize::Bound::AtMost};
  }

 private:
  uint64_t budget_;
  double limit_;
};

}  // namespace

uint64_t optimal_length_bound(const Model& m, uint64_t budget, double seconds) {
  uint64_t bound = segment_schedule_bound(m).instructions;
  // The residency bound's schedule recomputes each op at most once.
  bool aux = false;
  for (int v = 1; v < m.size() && !aux; ++v) aux = m.op(v).aux_bytes > 0;
  const auto L = static_cast<uint64_t>(m.loss());
  bound = std::max(bound, instructions_with_frees(m, 2 * L, aux ? 2 * L : 0));
  if (!milp_solver_name().empty() && milp_too_large(m, budget, seconds).empty()) {
    const uint64_t fwd = L + L * (L + 1) / 2;
    bound = std::max(bound, instructions_with_frees(m, fwd, aux ? fwd : 0));
  }
  // recompute-all, the least memory of the registered strategies (best_named
  // tries it): its length in O(n) on a chain, by walking its phases (O(n^2))
  // up to 20,000 ops.
  if (m.is_sequential() || m.size() <= 20000) bound = std::max(bound, make_recompute_all()->size(m, UINT64_MAX).instructions);
  return bound;
}

namespace {

// The registered strategies optimal compares itself with (the sweep's and the
// window's): every one that takes no argument, blocks:2, every-k:K for K up to
// twice sqrt's interval and every power of two, dtr:BUDGET under each
// heuristic, revolve:C (C <= 32) and budget:BUDGET on chains.
std::vector<StrategySpec> portfolio_specs(const Model& m, uint64_t budget) {
  std::vector<StrategySpec> s;
  auto add = [&](std::string_view name, std::vector<int64_t> parameters = {}) {
    try {
      s.push_back(strategy_spec(name, std::move(parameters)));
    } catch (const InputError&) {  // a parameter out of its range here (a budget of 0 bytes)
    }
  };
  for (const char* name : {"sqrt", "auto", "selective", "recompute-all"}) add(name);
  if (attention_core_absent(m).empty()) add("attention-core");
  if (blocks_absent(m).empty()) add("blocks"), add("blocks", {2});
  const int n = m.loss();
  for (int k = 1; k < n; ++k)
    if (k <= 2 * sqrt_interval(m) || (k & (k - 1)) == 0) add("every-k", {k});
  // dtr at this budget, each heuristic: it recomputes tensor by tensor, a
  // family the checkpoint sets do not cover (it beats them on ResNets).
  for (int64_t h = 0; h < static_cast<int64_t>(dtr_heuristic_names().size()); ++h)
    add("dtr", {static_cast<int64_t>(budget), h});
  if (is_chain(m)) {
    add("budget", {static_cast<int64_t>(budget)});
    for (int c = 1; c <= std::min(n, 32); ++c) add("revolve", {c});
  }
  return s;
}

}  // namespace

namespace {
constexpr double kSecondsPerInstruction = 25e-9;
}  // namespace

NamedCandidate best_named(const Model& m, uint64_t budget, uint64_t max_length, double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  NamedCandidate best;
  for (const StrategySpec& named : portfolio_specs(m, budget)) {
    if (Clock::now() >= until || cancel_requested()) break;
    const std::string spec = named.str();
    try {
      const auto strategy = make_strategy(named);
      const ScheduleSize size = strategy->size(m, max_length);
      if (size.instructions > max_length || size.bound == ScheduleSize::Bound::AtLeast) continue;
      // Making and simulating a schedule takes about 25 ns an instruction
      // (README, bench_simulate): one that cannot finish in the time left is
      // not started, so the time limit holds (recompute-all on chain:20000 is
      // 2·10⁸ instructions, 20 s).
      const double left = std::chrono::duration<double>(until - Clock::now()).count();
      if (static_cast<double>(size.instructions) * kSecondsPerInstruction > left) continue;
      std::vector<Instr> compute = compute_part(strategy->schedule(m));
      // As optimal returns it: its compute part, frees added again.
      const Simulation sim = simulate(m, with_frees(m, compute, spec), {.timeline = false});
      if (sim.peak_bytes > budget || (best.found && sim.recompute_flops >= best.recompute_flops)) continue;
      best = {true, named, std::move(compute), sim.recompute_flops, sim.peak_bytes};
    } catch (const InputError&) {  // not for this model (revolve on a DAG) or nothing fits (budget)
    }
  }
  return best;
}

uint64_t least_possible_peak(const Model& m, std::string* what) {
  uint64_t best = 0;
  // The bytes of the storages `ops` alias, each once.
  auto storages = [&](const std::vector<int>& ops) {
    std::vector<int> seen;
    uint64_t bytes = 0;
    for (int u : ops)
      if (std::find(seen.begin(), seen.end(), m.storage(u)) == seen.end())
        seen.push_back(m.storage(u)), bytes += m.op(m.storage(u)).bytes;
    return bytes;
  };
  for (int v = 1; v < m.size(); ++v) {
    std::vector<int> read = m.op(v).inputs;
    read.push_back(v);
    const uint64_t fwd = storages(read) + m.op(v).aux_bytes;
    const uint64_t bwd = storages(m.op(v).saved) + m.op(v).aux_bytes + m.grad_bytes(v);
    for (auto [need, kind] : {std::pair{fwd, InstrKind::Fwd}, std::pair{bwd, InstrKind::Bwd}}) {
      if (need <= best) continue;
      best = need;
      if (what) *what = to_string(Instr{kind, v}, m);
    }
  }
  return best;
}

OptimalOutcome optimal_schedule(const Model& m, uint64_t budget, double seconds) {
  const auto start = Clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const std::string solver = milp_solver_name();
  OptimalOutcome o;
  using S = MilpResult::Status;
  using RB = ResidencyBound::Status;
  // The residency bound first: a program with two binaries per op, solved in a
  // fraction of a second on most presets. A schedule that meets it is least
  // over general schedules, and no search need go on. The MILP gets three
  // quarters of the time after it where it runs at all; where it is too
  // large, the bound gets half the time (its bound is then the only one, and
  // its schedules often beat the branch and bound's).
  const std::string too_large = solver.empty() ? "" : milp_too_large(m, budget, seconds * 0.9 * 3 / 4);
  // The first backward step's bound and its schedule (first_step_bound.h):
  // one row, solved exactly in a fraction of a second, in every build. Where
  // the MILP is too large (or not built), first: when its schedule meets its
  // bound it is least over general schedules, and nothing else need run.
  // Its enumeration gets a quarter of the time, at least a second (as the
  // block DP: a fraction of one on GPT-2, 0.7 s on GPT-2 XL's shape).
  const auto fs_least = [&] {
    const FirstStepBound& f = o.first_step;
    return f.computed && !f.infeasible && f.fits && meets_bound(f.recompute_flops, f.bound);
  };
  const bool fs_early = !too_large.empty() || solver.empty();
  if (fs_early) o.first_step = first_step_bound(m, budget, true, std::max(1.0, seconds / 4));
  const bool fs_first = fs_least();
  if (!solver.empty() && !fs_first)
    o.residency = residency_bound(m, budget, std::max(0.5, seconds * (too_large.empty() ? 0.1 : 0.5)));
  const ResidencyBound& rb = o.residency;
  const bool bounded = rb.status == RB::Solved || rb.status == RB::TimeLimit;
  // It stands in where the residency bound's program was not solved (too
  // large, stopped by its time limit, no solver in this build), where it can
  // be the higher.
  if (rb.status != RB::Solved && !fs_early) o.first_step = first_step_bound(m, budget, true, std::max(1.0, seconds / 4));
  const bool first_step = o.first_step.computed && !o.first_step.infeasible && (!bounded || o.first_step.bound > rb.bound);
  const double floor = first_step ? o.first_step.bound : bounded ? rb.bound : -1;
  const bool rb_least = rb.fits && floor >= 0 && meets_bound(rb.recompute_flops, floor);
  const bool fs_meets = !rb_least && o.first_step.fits && floor >= 0 && meets_bound(o.first_step.recompute_flops, floor);
  const std::string skipped = rb.status == RB::Infeasible ? "not needed (the residency bound proves no schedule fits)"
                              : rb_least ? "not needed (the residency bound's schedule meets it)"
                              : fs_meets ? "not needed (the first backward step's schedule meets its bound)"
                                         : "";
  const bool milp_may_run = !solver.empty() && too_large.empty() && skipped.empty();
  const double after_bound = std::max(0.5, seconds - since_start());
  // The structure first (block_solver.h): a set the branch and bound starts
  // from, found in a fraction of its time on a chain of repeated blocks.
  std::vector<std::vector<int>> seeds;
  if (skipped.empty()) {
    // At least a second: enumerating a shape's options once (then cached, for
    // every budget of a sweep) takes a fraction of one on GPT-2's layer.
    o.blocks = block_solve(m, budget, std::max(1.0, (milp_may_run ? after_bound / 4 : after_bound) / 2));
    if (o.blocks.found) seeds.push_back(o.blocks.checkpoints);
  }
  const double after_blocks = std::max(0.5, seconds - since_start());
  if (skipped.empty()) o.sets = optimal_search(m, budget, milp_may_run ? after_blocks / 4 : after_blocks, floor, seeds);
  const double bb_seconds = skipped.empty() ? since_start() - rb.seconds : 0;  // (and milp_too_large's, the block DP's)
  const bool met = o.sets.found && floor >= 0 && meets_bound(o.sets.recompute_flops, floor);
  SolverRecord bb{"branch and bound", "checkpoint sets", o.sets.proven ? (o.sets.found ? "proven" : "infeasible") : "time limit",
                  false, o.sets.found ? o.sets.recompute_flops : -1, -1, -1, bb_seconds};
  if (!skipped.empty()) bb.status = skipped;
  if (o.blocks.blocks > 0) {
    const BlockSolution& k = o.blocks;
    bb.detail = "started from the block DP's set (" + std::to_string(k.blocks) + " blocks of " + std::to_string(k.shapes) +
                " shapes, " + std::to_string(k.options) + " options" + (k.complete ? "" : ", not all enumerated") + "; " +
                (k.found ? std::to_string(k.recompute_flops) + " recompute FLOPs" : std::string("none fits")) + " in " +
                std::to_string(k.seconds).substr(0, 5) + " s)";
  }
  // The best schedule so far, and which solver's it is (0, 1, 2: the records' order).
  int chosen = -1;
  auto offer = [&](const std::vector<Instr>& compute, double flops, int who) {
    if (chosen >= 0 && flops >= o.recompute_flops) return;
    o.found = true, o.compute = compute, o.recompute_flops = flops, chosen = who;
  };
  if (o.sets.found) offer(compute_part(segment_schedule(m, o.sets.checkpoints, "optimal")), o.sets.recompute_flops, 0);
  if (rb.fits) offer(rb.compute, rb.recompute_flops, 2);
  // The first step's schedule only where it meets the bound (then it is
  // least); elsewhere the other solvers' are as good a start, and say more.
  if (fs_meets) offer(o.first_step.compute, o.first_step.recompute_flops, 4);

  SolverRecord mr{solver.empty() ? "MILP" : "MILP (" + solver + ")", "general schedules", "not in this build", false, -1, -1, -1, 0};
  if (!solver.empty()) {
    const double left = std::max(0.5, seconds - since_start());
    // Too large is said first: it is known before anything runs, so the record
    // does not depend on how fast the other solvers happened to finish.
    if (!too_large.empty()) {
      o.milp.status = S::TooLarge;
      o.milp.note = too_large;
    } else if (!skipped.empty()) {
      mr.status = skipped;
    } else if (met) {
      mr.status = "not needed (the branch and bound's schedule meets the residency bound)";
    } else {
      const std::vector<Instr> warm = o.compute;  // the best so far as its start
      o.milp = solve_milp(m, budget, left, o.found ? &warm : nullptr);
    }
    mr.seconds = o.milp.seconds;
    switch (o.milp.status) {
      case S::Optimal: mr.status = "proven"; break;
      case S::Feasible: mr.status = "time limit"; break;
      case S::Infeasible: mr.status = "infeasible"; break;
      case S::NoSolution: mr.status = "no schedule found"; break;
      case S::TooLarge: mr.status = "too large (" + o.milp.note + ")"; break;
      case S::NotBuilt: break;
    }
    if (o.milp.status == S::Optimal || o.milp.status == S::Feasible) {
      // The solution becomes an ordinary schedule; the simulator must agree
      // with the MILP's memory to the byte, or the formulation is wrong.
      const Simulation sim = simulate(m, with_frees(m, o.milp.compute, "milp"));
      if (sim.peak_bytes != o.milp.peak || sim.peak_bytes > budget || sim.recompute_flops != o.milp.recompute_flops)
        throw std::logic_error("optimal: the MILP's schedule peaks at " + std::to_string(sim.peak_bytes) +
                               " bytes in the simulator, " + std::to_string(o.milp.peak) + " in the MILP (budget " +
                               std::to_string(budget) + ")");
      if (o.milp.bound < floor) o.milp.bound = std::min(floor, o.milp.recompute_flops);  // the residency bound is the stronger
      if (meets_bound(o.milp.recompute_flops, o.milp.bound)) o.milp.status = S::Optimal, mr.status = "proven";
      mr.recompute_flops = o.milp.recompute_flops, mr.bound = o.milp.bound;
      std::tie(mr.gap, mr.step_gap) = gaps(m, o.milp.recompute_flops, o.milp.bound);
      o.milp.gap = mr.gap, o.milp.step_gap = mr.step_gap;
      offer(o.milp.compute, o.milp.recompute_flops, 1);
    }
  }
  // Every registered strategy that fits is a candidate too: optimal is never
  // above a point the sweep or the window would show beside it.
  // (Not where a solver's schedule meets a bound: nothing recomputes less.)
  double general_so_far = floor;
  if (o.milp.status == S::Optimal || o.milp.status == S::Feasible) general_so_far = std::max(general_so_far, o.milp.bound);
  const bool least_so_far = o.found && ((general_so_far >= 0 && meets_bound(o.recompute_flops, general_so_far)) ||
                                        o.milp.status == S::Optimal || o.recompute_flops == 0);
  if (const NamedCandidate n = least_so_far ? NamedCandidate{}
                                            : best_named(m, budget, optimal_length_bound(m, budget, seconds),
                                                         std::max(0.25, seconds - since_start()));
      n.found) {
    const double before = o.found ? o.recompute_flops : -1;
    offer(n.compute, n.recompute_flops, 3);
    if (chosen == 3 && (before < 0 || n.recompute_flops < before)) o.from_named = n.spec;
  }
  o.from_milp = chosen == 1, o.from_residency = chosen == 2, o.from_first_step = chosen == 4;
  // What each schedule is proven against: the branch and bound's own search
  // (checkpoint sets), or a bound on every general schedule (the residency
  // bound's, or the MILP's).
  double general = floor;
  if (o.milp.status == S::Optimal || o.milp.status == S::Feasible) general = std::max(general, o.milp.bound);
  if (o.sets.found && o.sets.proven && !met) bb.bound = o.sets.recompute_flops;
  if (o.sets.found && general > bb.bound) bb.bound = std::min(general, o.sets.recompute_flops);
  if (met) bb.status = "proven";
  if (bb.bound >= 0) std::tie(bb.gap, bb.step_gap) = gaps(m, o.sets.recompute_flops, bb.bound);
  compare_to_bound(m, bb);
  compare_to_bound(m, mr);
  o.records.push_back(bb);
  o.records.push_back(mr);
  // The bounds over general schedules: the residency bound's, and the first
  // backward step's where it is the higher, in one record; the first step's
  // schedule, where chosen, is this record's.
  SolverRecord rr{solver.empty() ? "residency bound" : "residency bound (" + solver + ")", "general schedules",
                  fs_first ? "not needed (the first backward step's schedule meets its bound)" : "not in this build", false,
                  -1, -1, -1, rb.seconds};
  if (o.from_first_step && (solver.empty() || fs_first)) rr.solver = "first backward step's bound";
  switch (rb.status) {
    case RB::Solved: rr.status = "solved"; break;
    case RB::TimeLimit: rr.status = "time limit"; break;
    case RB::Infeasible: rr.status = "infeasible"; break;
    case RB::TooLarge: rr.status = "too large (" + rb.note + ")"; break;
    case RB::NotBuilt: break;
  }
  if (bounded || first_step) rr.bound = std::min(general, rb.fits ? rb.recompute_flops : general);
  if (first_step) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "the bound is the first backward step's (one row, solved %s in %.2f s): %.6g FLOPs",
                  o.first_step.exact ? "exactly" : "with bytes rounded down", o.first_step.seconds, o.first_step.bound);
    rr.detail = buf;
    if (bounded) rr.detail += "; the residency bound's own is " + std::to_string(rb.bound);
  }
  if (rb.fits) {
    rr.recompute_flops = rb.recompute_flops;
    std::tie(rr.gap, rr.step_gap) = gaps(m, rb.recompute_flops, rr.bound);
    if (meets_bound(rb.recompute_flops, rr.bound)) rr.status = "proven";
  }
  if (o.from_first_step) {
    const FirstStepBound& f = o.first_step;
    rr.recompute_flops = f.recompute_flops;
    rr.seconds = rb.seconds + f.seconds;
    std::tie(rr.gap, rr.step_gap) = gaps(m, f.recompute_flops, rr.bound);
    if (meets_bound(f.recompute_flops, rr.bound)) rr.status = "proven";
    const std::string mine = "the schedule is the first step's (each storage its row recomputes, recomputed once at its first need)";
    rr.detail += rr.detail.empty() ? mine : "; " + mine;
  }
  compare_to_bound(m, rr);
  o.records.push_back(rr);
  if (chosen >= 0 && chosen < 3) o.records[static_cast<std::size_t>(chosen)].chosen = true;
  if (chosen == 4) o.records[2].chosen = true;
  const bool proven = o.found && general >= 0 && meets_bound(o.recompute_flops, general);

  const std::string b = std::to_string(budget) + " bytes";
  const std::string longer = "optimal:" + std::to_string(budget) + ":SECONDS gives it longer";
  const std::string least = o.sets.evaluated ? "; the smallest peak seen is " + std::to_string(o.sets.least_peak) + " bytes" : "";
  if (!o.found) {
    std::string what;
    const uint64_t least_peak = least_possible_peak(m, &what);
    if (least_peak > budget)
      o.infeasible = "optimal: " + b + " is infeasible for model '" + m.name + "': " + what + " alone needs " +
                     std::to_string(least_peak) + " bytes";
    else if (o.residency.status == RB::Infeasible)
      o.infeasible = "optimal: " + b + " is infeasible for model '" + m.name +
                     "' (proven by the residency bound over general schedules: what every one must hold at some step exceeds it)";
    else if (o.milp.status == S::Infeasible)
      o.infeasible = "optimal: " + b + " is infeasible for model '" + m.name + "' (proven by the MILP over general schedules)" + least;
    else if (solver.empty() && o.sets.proven)
      o.infeasible = "optimal: no checkpoint set fits " + b + " for model '" + m.name +
                     "' (proven; this build has no MILP to search other schedules)" + least;
    else
      o.infeasible = "optimal: no schedule within " + b + " was found for model '" + m.name + "' in " + seconds_text(seconds) +
                     least + " (" + longer + ")";
    return o;
  }
  // A note only when a time limit stopped what would have proven the answer
  // (the window then says "best found, not proven").
  const std::string limit = "time limit (" + seconds_text(seconds) + ")";
  // Against the bound: the ratio (the least may be as low as the bound), and
  // both as overheads. (gap, (found - bound) / found, is what the records
  // keep for the solvers; as "above the least" it would understate: a
  // schedule at 4.4x the bound has a gap of 77%.)
  std::string at_most;
  if (general >= 0 && !meets_bound(o.recompute_flops, general)) {
    SolverRecord r;
    r.recompute_flops = o.recompute_flops, r.bound = general;
    compare_to_bound(m, r);
    at_most = std::string(" recomputing ") + (r.ratio > 0 ? "at most " + ratio_text(r.ratio) + " the least" : "FLOPs where the least may be none") +
              " over general schedules (overhead " + percent2(std::max(0.0, r.overhead)) + ", the lower bound's " +
              percent2(std::max(0.0, r.bound_overhead)) + ")";
  }
  if (o.from_named)
    o.note = "the registered strategy " + o.from_named->str() + " recomputes less than every solver's schedule found in the " + limit +
             (at_most.empty() ? "" : "," + at_most) + (proven ? "" : ": not proven least (" + longer + ")");
  else if (proven || o.milp.status == S::Optimal)
    o.note = "";
  else if (o.milp.status == S::Feasible)
    o.note = "the MILP stopped at its " + limit + at_most + ": not proven least (" + longer + ")";
  else if (o.milp.status == S::NoSolution)
    o.note = "the MILP stopped at its " + limit + " without a schedule; " +
             (o.from_residency ? std::string("the residency bound's schedule")
                               : "the best checkpoint set" + std::string(o.sets.proven ? " (least among sets)" : "")) +
             " is used" + (at_most.empty() ? "" : "," + at_most) + ": not proven least (" + longer + ")";
  else if (o.from_residency)
    o.note = "the residency bound's schedule recomputes less than " +
             (o.sets.proven ? std::string("the least checkpoint set")
                            : "any of the " + std::to_string(o.sets.evaluated) + " checkpoint sets the search tried in its " + limit) +
             (at_most.empty() ? "" : "," + at_most) + ", not proven least (" + longer + ")";
  else if (!o.sets.proven)
    o.note = "the search stopped at its " + limit + " after " + std::to_string(o.sets.evaluated) + " checkpoint sets: the best found" +
             (at_most.empty() ? "" : "," + at_most) + ", not proven least (" + longer + ")";
  return o;
}

std::unique_ptr<Strategy> make_optimal(uint64_t budget, double time_limit_s) {
  return std::make_unique<Optimal>(budget, time_limit_s);
}

}  // namespace remat
