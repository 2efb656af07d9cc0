// One constructor per strategy, for the registry (registry.h), which is the
// only place that names them to users. Each returns an ordinary schedule
// maker; docs/strategies.md says what each optimises.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/strategies/strategy.h"

namespace remat {

// Checkpoint sets fed to the generator (set_strategies.cpp).
std::unique_ptr<Strategy> make_store_all();
std::unique_ptr<Strategy> make_recompute_all();
std::unique_ptr<Strategy> make_every_k(int k);  // k = 0: sqrt
std::unique_ptr<Strategy> make_manual(std::vector<int> sorted_ops);
std::unique_ptr<Strategy> make_auto();
std::unique_ptr<Strategy> make_selective();

// From the graph's structure (block_strategies.cpp, repeated_blocks.h): every
// op kept but the first `count` attention cores (0: all); every op kept but
// those inside a block, every `every`-th block's output kept (0: each).
std::unique_ptr<Strategy> make_attention_core(int count);
std::unique_ptr<Strategy> make_blocks(int every);

// Binomial checkpointing for chains: `slots` stored states, the input's
// included (revolve.cpp).
std::unique_ptr<Strategy> make_revolve(int slots);

// Chains: the least recompute FLOPs whose peak fits `budget` bytes
// (budget.cpp). InputError "infeasible" names the smallest feasible budget.
std::unique_ptr<Strategy> make_budget(uint64_t budget);

// Any DAG: least recompute FLOPs under `budget` bytes with a time limit; best
// found when it runs out (optimal.cpp).
std::unique_ptr<Strategy> make_optimal(uint64_t budget, double time_limit_s);

// Any DAG: dynamic tensor rematerialization under `budget` bytes, evicting by
// `heuristic` (dtr.h, dtr.cpp).
enum class DtrHeuristic : uint8_t;
std::unique_ptr<Strategy> make_dtr(uint64_t budget, DtrHeuristic heuristic);

}  // namespace remat
