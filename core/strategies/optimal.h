// optimal:BYTES — the least recompute FLOPs under a byte budget among the
// schedules checkpoint_schedule makes from a checkpoint set (segment phases).
// Exact (every set tried) when the model has at most kExhaustiveOps candidate
// ops and the time limit allows; otherwise the best found by seeding with the
// other strategies and improving by single add/remove moves: `proven` says which.
#pragma once
#include <cstdint>
#include <vector>

namespace remat {

struct Model;

struct OptimalResult {
  bool found = false;       // some set fits the budget
  bool proven = false;      // every candidate set was evaluated
  std::vector<int> checkpoints;
  double recompute_flops = 0;
  uint64_t peak = 0;
  uint64_t least_peak = 0;  // the smallest peak seen (for "infeasible" messages)
  int64_t evaluated = 0;
};

constexpr int kExhaustiveOps = 18;

OptimalResult optimal_search(const Model& m, uint64_t budget, double time_limit_s);

}  // namespace remat
