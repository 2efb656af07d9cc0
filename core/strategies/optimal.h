// The branch and bound behind optimal:BYTES (optimal_schedule.h adds the
// MILP): the least recompute FLOPs under a byte budget among the schedules
// checkpoint_schedule makes from a checkpoint set (segment phases).
// A branch and bound over every set, seeded with the other strategies (and,
// above kSeedSearchAboveOps candidate ops, an iterated local search): `proven` when
// it finished within the time limit, else the best set found so far.
#pragma once
#include <cstdint>
#include <vector>

namespace remat {

struct Model;

struct OptimalResult {
  bool found = false;       // some set fits the budget
  bool proven = false;      // the search finished: no set fits with fewer FLOPs
  std::vector<int> checkpoints;
  double recompute_flops = 0;
  uint64_t peak = 0;
  uint64_t least_peak = 0;  // the smallest peak seen (for "infeasible" messages)
  int64_t evaluated = 0;
};

// Above this many candidate ops a local search finds an incumbent first (a
// quarter of the time limit); below, the branch and bound alone is faster.
constexpr int kSeedSearchAboveOps = 18;

// optimal:BYTES without :SECONDS. Someone is waiting for the answer: a few
// seconds unless they ask for more.
constexpr double kOptimalDefaultSeconds = 5.0;

// `floor`: a proven lower bound on the recompute FLOPs of any schedule within
// the budget (residency_bound.h), or -1: the search stops, proven, as soon as
// a set meets it. `seeds`: sets tried first, before the named families (the
// block DP's, block_solver.h), as incumbents.
OptimalResult optimal_search(const Model& m, uint64_t budget, double time_limit_s, double floor = -1,
                             const std::vector<std::vector<int>>& seeds = {});

}  // namespace remat
