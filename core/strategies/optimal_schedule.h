// optimal:BYTES[:SECONDS]: both searches behind one name. The branch and bound
// (optimal.h) is exact over checkpoint sets; the MILP (milp_schedule.h), when
// the build has one, searches the wider family of general schedules, starting
// from the branch and bound's answer. The schedule returned is the one with
// fewer recompute FLOPs; the records say which solver proved what.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sim/schedule.h"
#include "core/strategies/block_solver.h"
#include "core/strategies/first_step_bound.h"
#include "core/strategies/milp_schedule.h"
#include "core/strategies/optimal.h"
#include "core/strategies/registry.h"
#include "core/strategies/residency_bound.h"
#include "core/strategies/strategy.h"

namespace remat {

struct Model;

struct OptimalOutcome {
  bool found = false;
  std::vector<Instr> compute;   // the chosen fwd/bwd program (with_frees adds the frees)
  double recompute_flops = 0;
  bool from_milp = false;
  bool from_residency = false;  // the chosen schedule is the residency bound's (residency_bound.h)
  bool from_first_step = false;  // the chosen schedule is the first backward step's (first_step_bound.h)
  BlockSolution blocks;         // the block DP's (block_solver.h), the branch and bound's first incumbent
  OptimalResult sets;           // the branch and bound's
  MilpResult milp;              // status NotBuilt without a MILP
  ResidencyBound residency;     // status NotBuilt without a MILP solver
  // Computed where the MILP is too large or not built (first, before the
  // residency bound), or where the residency bound was not solved.
  FirstStepBound first_step;
  // The registered strategy whose schedule was chosen (best_named): it fits
  // and recomputes less than every solver's; empty when a solver's was chosen.
  std::optional<StrategySpec> from_named;
  std::vector<SolverRecord> records;
  // Why nothing fits, or what is not proven (empty when the answer is proven
  // by the solver that found it).
  std::string infeasible, note;
};

// `seconds` in all. Where the MILP is too large (or not built), the first
// backward step's bound and its schedule first (first_step_bound.h, a
// fraction of a second): a schedule that meets it is least over general
// schedules, and nothing else runs. With CBC, the residency bound (a tenth of
// the time at most, half where the MILP is too large; usually far less); the
// first step's bound where that is not solved; then the
// block DP (block_solver.h: half of the branch and bound's share at most, at
// least a second), whose set the branch and bound starts from; a quarter of
// the rest for the branch and bound when the MILP runs (a model
// milp_too_large() lets it attempt; it gets the rest and the best schedule so
// far as its start), else all of it; then the registered strategies
// (best_named), so the answer is never above one that fits. A schedule that
// meets the residency bound (or the first step's, where higher) is least over
// general schedules: the searches stop there.
OptimalOutcome optimal_schedule(const Model& model, uint64_t budget, double seconds);

// The most instructions optimal's schedule can have (Strategy::size): a
// segment schedule's, the residency bound's, the MILP's where it may run.
uint64_t optimal_length_bound(const Model& model, uint64_t budget, double seconds);

// The registered strategy (every one without an argument, blocks:2, every-k:K
// for K up to twice sqrt's interval and each power of two; revolve:C, C <= 32,
// and budget:BUDGET on chains) of fewest recompute FLOPs whose schedule fits
// `budget` and has at most `max_length` instructions; tried until `seconds`
// run out.
struct NamedCandidate {
  bool found = false;
  StrategySpec spec;
  std::vector<Instr> compute;
  double recompute_flops = 0;
  uint64_t peak = 0;
};
NamedCandidate best_named(const Model& model, uint64_t budget, uint64_t max_length, double seconds);

// A peak no schedule of `model` can go below: the largest instruction on its
// own (the storages of a fwd's inputs and output, and its aux; the storages a
// bwd saves, its aux and G). `what` names it.
uint64_t least_possible_peak(const Model& model, std::string* what = nullptr);

}  // namespace remat
