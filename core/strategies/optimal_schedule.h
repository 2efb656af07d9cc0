// optimal:BYTES[:SECONDS]: both searches behind one name. The branch and bound
// (optimal.h) is exact over checkpoint sets; the MILP (milp_schedule.h), when
// the build has one, searches the wider family of general schedules, starting
// from the branch and bound's answer. The schedule returned is the one with
// fewer recompute FLOPs; the records say which solver proved what.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/schedule.h"
#include "core/strategies/milp_schedule.h"
#include "core/strategies/optimal.h"
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
  OptimalResult sets;           // the branch and bound's
  MilpResult milp;              // status NotBuilt without a MILP
  ResidencyBound residency;     // status NotBuilt without a MILP solver
  std::vector<SolverRecord> records;
  // Why nothing fits, or what is not proven (empty when the answer is proven
  // by the solver that found it).
  std::string infeasible, note;
};

// `seconds` in all. With CBC, the residency bound first (a tenth of the time
// at most, half where the MILP is too large; usually far less); then a
// quarter of the rest for the branch and bound when the MILP runs (a model
// milp_too_large() lets it attempt; it gets the rest and the best schedule so
// far as its start), else all of it. A schedule that meets the residency bound
// is least over general schedules: the searches stop there.
OptimalOutcome optimal_schedule(const Model& model, uint64_t budget, double seconds);

// A peak no schedule of `model` can go below: the largest instruction on its
// own (the storages of a fwd's inputs and output, and its aux; the storages a
// bwd saves, its aux and G). `what` names it.
uint64_t least_possible_peak(const Model& model, std::string* what = nullptr);

}  // namespace remat
