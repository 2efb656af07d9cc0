#include "core/strategies/optimal_schedule.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "core/errors.h"
#include "core/model.h"
#include "core/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/factories.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(double s) { return std::to_string(static_cast<long long>(s + 0.5)) + " s"; }

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
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
  ScheduleSize size(const Model& m, uint64_t) const override {
    ScheduleSize bound = segment_schedule_bound(m);
    if (!milp_solver_name().empty() && milp_too_large(m, budget_, limit_).empty()) {
      const auto L = static_cast<uint64_t>(m.loss());
      const uint64_t fwd = L + L * (L + 1) / 2;
      bool aux = false;
      for (int v = 1; v < m.size() && !aux; ++v) aux = m.op(v).aux_bytes > 0;
      bound.instructions = std::max(bound.instructions, instructions_with_frees(m, fwd, aux ? fwd : 0));
    }
    return bound;
  }

 private:
  uint64_t budget_;
  double limit_;
};

}  // namespace

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
  const std::string solver = milp_solver_name();
  OptimalOutcome o;
  // The MILP gets three quarters of the time where it runs at all.
  const std::string too_large = solver.empty() ? "" : milp_too_large(m, budget, seconds * 3 / 4);
  const bool milp_runs = !solver.empty() && too_large.empty();
  o.sets = optimal_search(m, budget, milp_runs ? seconds / 4 : seconds);
  const double bb_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  SolverRecord bb{"branch and bound", "checkpoint sets", o.sets.proven ? (o.sets.found ? "proven" : "infeasible") : "time limit",
                  false, o.sets.found ? o.sets.recompute_flops : -1, -1, -1, bb_seconds};
  if (o.sets.proven && o.sets.found) bb.bound = o.sets.recompute_flops, bb.gap = 0, bb.step_gap = 0;
  std::vector<Instr> warm;
  if (o.sets.found) {
    warm = compute_part(segment_schedule(m, o.sets.checkpoints, "optimal"));
    o.found = true, o.compute = warm, o.recompute_flops = o.sets.recompute_flops;
  }
  o.records.push_back(bb);

  SolverRecord mr{solver.empty() ? "MILP" : "MILP (" + solver + ")", "general schedules", "not in this build", false, -1, -1, -1, 0};
  if (!solver.empty()) {
    const double left = std::max(0.5, seconds - bb_seconds);
    if (milp_runs) {
      o.milp = solve_milp(m, budget, left, o.sets.found ? &warm : nullptr);
    } else {
      o.milp.status = MilpResult::Status::TooLarge;
      o.milp.note = too_large;
    }
    mr.seconds = o.milp.seconds;
    using S = MilpResult::Status;
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
      mr.recompute_flops = o.milp.recompute_flops, mr.bound = o.milp.bound, mr.gap = o.milp.gap, mr.step_gap = o.milp.step_gap;
      if (!o.found || o.milp.recompute_flops < o.recompute_flops) {
        o.found = true, o.from_milp = true, o.compute = o.milp.compute, o.recompute_flops = o.milp.recompute_flops;
      }
    } else if (o.milp.status == S::Infeasible) {
      mr.bound = -1;
    }
  }
  o.records.push_back(mr);
  (o.from_milp ? o.records[1] : o.records[0]).chosen = o.found;

  const std::string b = std::to_string(budget) + " bytes";
  const std::string longer = "optimal:" + std::to_string(budget) + ":SECONDS gives it longer";
  const std::string least = o.sets.evaluated ? "; the smallest peak seen is " + std::to_string(o.sets.least_peak) + " bytes" : "";
  if (!o.found) {
    std::string what;
    const uint64_t floor = least_possible_peak(m, &what);
    if (floor > budget)
      o.infeasible = "optimal: " + b + " is infeasible for model '" + m.name + "': " + what + " alone needs " +
                     std::to_string(floor) + " bytes";
    else if (o.milp.status == MilpResult::Status::Infeasible)
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
  if (o.milp.status == MilpResult::Status::Feasible)
    o.note = "the MILP stopped at its " + limit + " at most " + percent(o.milp.gap) +
             " above the least recompute FLOPs over general schedules (" + percent(o.milp.step_gap) +
             " of the training step's FLOPs): not proven least (" + longer + ")";
  else if (o.milp.status == MilpResult::Status::NoSolution)
    o.note = "the MILP stopped at its " + limit + " without a schedule; the best checkpoint set" +
             (o.sets.proven ? " (least among sets)" : "") + " is used: not proven least (" + longer + ")";
  else if (o.milp.status != MilpResult::Status::Optimal && !o.sets.proven)
    o.note = "the search stopped at its " + limit + " after " + std::to_string(o.sets.evaluated) +
             " checkpoint sets: the best found, not proven least (" + longer + ")";
  return o;
}

std::unique_ptr<Strategy> make_optimal(uint64_t budget, double time_limit_s) {
  return std::make_unique<Optimal>(budget, time_limit_s);
}

}  // namespace remat
