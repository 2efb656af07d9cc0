// Strategies beyond the seeds (docs/strategies.md): binomial checkpointing,
// budgeted and exact searches, articulation-point and selective checkpointing.
// Each returns an ordinary schedule; core/strategy.cpp's make_strategy() names them.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/strategy.h"

namespace remat {

struct Model;

// True when every op but the input reads exactly the op before it and is read
// only by the op after it (chain:N, mlp:N).
bool is_chain(const Model& model);

// Revolve: `slots` checkpoint slots, the input's among them (slots >= 1).
std::unique_ptr<Strategy> make_revolve(int slots);
// Minimal number of forward advances to reverse n steps with c slots
// (Griewank & Walther): r·n − β(c+1, r−1), β(c, r) = binom(c+r, c), r the
// least integer with β(c, r) >= n (revolve.cpp maps this to fwd counts).
int64_t revolve_advances(int64_t n, int c);

// Keep Linear/Dense/loss outputs (and branch points); recompute the cheap ops.
std::unique_ptr<Strategy> make_selective();
std::vector<int> selective_checkpoints(const Model& model);

// Articulation points of the undirected graph, spaced about ceil(sqrt(n)).
std::unique_ptr<Strategy> make_auto();
std::vector<int> articulation_candidates(const Model& model);
std::vector<int> auto_checkpoints(const Model& model);

// Least recompute FLOPs with a simulated peak <= budget, over checkpoint sets
// of a chain (dynamic programming; exact up to kExactChainLayers layers, see
// chain_segments.h). InputError "infeasible" names the smallest feasible budget.
std::unique_ptr<Strategy> make_budget(uint64_t budget);

// Exact search over checkpoint sets of any DAG under a byte budget, with a time
// limit (best found so far when it runs out).
std::unique_ptr<Strategy> make_optimal(uint64_t budget, double time_limit_s = 20.0);

}  // namespace remat
