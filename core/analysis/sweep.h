// The memory–time trade-off: for each memory budget, the least recompute
// overhead any strategy reaches within it, plus the named strategies as points.
// With compressed checkpoints (SweepOptions::compress) every point is its
// schedule with the modifier +compress:DTYPE: peaks at the stored sizes.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/sim/compression.h"
#include "core/sim/instruction_limit.h"
#include "core/strategies/registry.h"

namespace remat {

struct Model;

struct SweepPoint {
  uint64_t budget = 0;
  bool feasible = false;
  StrategySpec spec;       // recreates the schedule (budget:N, manual:..., sqrt)
  uint64_t peak = 0;
  double overhead = 0;     // recomputed forward FLOPs over one forward + backward
  double recompute_flops = 0;
  uint64_t compressed_bytes = 0;  // stored size of the compressed checkpoints C(v) (Simulation::compressed_bytes)
};

struct NamedPoint {
  StrategySpec spec;
  uint64_t peak = 0;
  double overhead = 0;
  double recompute_flops = 0;
  uint64_t compressed_bytes = 0;
};

struct SweepResult {
  std::vector<SweepPoint> budgets;  // increasing budgets; overhead non-increasing
  std::vector<NamedPoint> named;
  // Chains only: the same budgets with one level of checkpoints (checkpoint
  // sets, the single-level DP), so the window can show what nesting buys.
  std::vector<SweepPoint> single_level;
  std::vector<std::string> notes;   // what was left out and why (a strategy too large to simulate)
  Packing compress = Packing::None;  // SweepOptions::compress
};

struct SweepOptions {
  double optimal_seconds = 1.0;  // per budget, DAGs only (optimal: branch and bound, then the MILP; chains use budget's DP)
  std::function<void(int done, int total)> progress;  // optional
  const std::atomic<bool>* cancel = nullptr;          // optional: stop and return what is done
  // named_points(m) when the caller already has them (auto budgets need them
  // too; recompute-all is quadratic); empty: the sweep simulates them.
  std::vector<NamedPoint> named;
  std::vector<std::string> notes;  // named_points' notes, when the caller made them
  InstructionLimit limit;          // per schedule; longer ones are left out with a note
  // Every schedule the sweep makes gets compressed checkpoints
  // (with_compression; specs end in +compress:DTYPE) and is judged at its
  // compressed peak. `named` must then have been made with the same type.
  Packing compress = Packing::None;
};

// store-all, recompute-all, sqrt, auto, selective (and revolve on chains),
// simulated, each +compress:DTYPE unless `compress` is None. One longer than
// `limit` is left out, with a line in *notes.
std::vector<NamedPoint> named_points(const Model& m, const InstructionLimit& limit = {},
                                     std::vector<std::string>* notes = nullptr, Packing compress = Packing::None);
// `count` budgets evenly from recompute-all's peak (or the least named peak
// when it was left out) to store-all's, plus the peak of each named strategy
// (so none of them lies below the front).
std::vector<uint64_t> auto_budgets(const std::vector<NamedPoint>& named, int count = 12);
// Parses "auto" or "B1,B2,..." (byte suffixes allowed, or shares: 90%,50%); throws InputError.
// A share ("90%,50%") is of `store_all_peak` (0: the list has none, or they are 0 bytes).
std::vector<uint64_t> parse_budgets(const std::vector<NamedPoint>& named, const std::string& list,
                                    uint64_t store_all_peak = 0);

SweepResult sweep(const Model& m, std::vector<uint64_t> budgets, const SweepOptions& options = {});
nlohmann::json sweep_json(const Model& m, const SweepResult& r);

}  // namespace remat
