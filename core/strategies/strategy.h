// The strategy interface: each strategy turns a model into an ordinary
// schedule, so the simulator, executor and GUI need no special cases. The
// strategies themselves live in core/strategies/; registry.h names them and
// parses their specs into StrategySpec values ("sqrt", "every-k:4",
// "manual:3,7,11").
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

// What one solver behind a schedule proved (optimal, budget); the JSON output
// lists them ("solvers") so a user sees which solver proved what.
struct SolverRecord {
  std::string solver;   // "branch and bound", "MILP (CBC 2.10.8)", "nested DP", ...
  std::string family;   // the schedules it searched: "checkpoint sets", "general schedules", ...
  std::string status;   // "proven", "time limit", "infeasible", "no schedule found", "approximate", "not in this build"
  bool chosen = false;  // the schedule returned is this solver's
  double recompute_flops = -1;  // of its best schedule; -1: none
  double bound = -1;            // a proven lower bound on its family's least recompute FLOPs; -1: none
  double gap = -1;              // (recompute_flops - bound) / recompute_flops; -1: none
  double seconds = 0;
  // (recompute_flops - bound) over the whole step's FLOPs (forward + backward
  // + recompute_flops); -1: none. Much smaller than `gap`: the step's FLOPs
  // are mostly the one forward and backward no schedule avoids.
  double step_gap = -1;
  // recompute_flops / bound, the honest "how far from the least": at most this
  // many times the least FLOPs; -1: no bound (or a zero bound under FLOPs).
  double ratio = -1;
  // recompute_flops and bound over one forward plus one backward pass (the
  // overhead simulate reports), side by side; -1: none.
  double overhead = -1, bound_overhead = -1;
  // What else a user should know about this solver's run (where its search
  // started from), "" when nothing.
  std::string detail = "";
};

// What a strategy that decides while the step runs (dtr) plays into: each
// instruction it decides on is handed to `run` at once, and `live_bytes`
// says what is held now, read from the executor's allocator rather than
// from the strategy's own count.
struct LiveRun {
  std::function<void(Instr)> run;
  std::function<uint64_t()> live_bytes;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The spec that recreates this strategy ("every-k:4").
  virtual std::string name() const = 0;
  // Throws InputError when the strategy cannot apply to this model (e.g. a
  // checkpoint index out of range).
  virtual Schedule schedule(const Model& model) const = 0;
  // The same schedule, and what the solvers behind it proved: searches append
  // their records, other strategies leave `records` alone.
  virtual Schedule schedule_with_record(const Model& model, std::vector<SolverRecord>& records) const {
    (void)records;
    return schedule(model);
  }
  // The length of schedule(model), stated before it is made
  // (instruction_limit.h refuses the ones that would not fit): exact, or an
  // upper bound for searches; counting may stop once it passes `limit`
  // (Bound::AtLeast). Cheap next to schedule(). Throws as schedule() would.
  virtual ScheduleSize size(const Model& model, uint64_t limit) const = 0;
  // The checkpoint set the strategy names on this model, where it names one
  // (sqrt and every-k: what crosses each cut; manual: its list), for the
  // graph to ring even the checkpoint no recompute reads; empty for others.
  virtual std::vector<int> declared_checkpoints(const Model& model) const {
    (void)model;
    return {};
  }
  // A strategy that decides at run time (its catalog entry says so:
  // StrategyInfo::decides_live) plays here instead of the executor replaying
  // schedule(), whose instructions are what it must hand over (the executor
  // checks each one). The others throw.
  virtual void play_live(const Model& model, const LiveRun& live) const {
    (void)model, (void)live;
    throw std::logic_error(name() + " decides before the step, not while it runs");
  }
};

}  // namespace remat
