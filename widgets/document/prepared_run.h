// A simulated strategy with everything the window reads per step, built once
// (on a worker thread for slow ones) and never moved afterwards: the resident
// index points into this run's schedule and into the shared model.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "core/sim/time_model.h"
#include "widgets/document/node_states.h"
#include "widgets/document/phase_map.h"
#include "widgets/views/legend_looks.h"

namespace remat {

struct PreparedRun {
  std::shared_ptr<const Model> model;  // keeps the index's model alive
  StrategyRun run;
  std::unique_ptr<ResidentIndex> index;  // null for an invalid or pending run
  std::unique_ptr<ScheduleFacts> facts;
  PhaseMap phases;
  // Strategies that offload: the time model's stalls (core/sim/time_model.h, at
  // the rates prepare_run was given), each fwd/bwd that waits for a fetch;
  // run.sim.time holds the totals. Empty, and no time predicted, for the others.
  std::vector<Stall> stalls;
  // The graph's looks this run shows (the legend lists those that occur).
  LegendMask legend = 0;
};

// Builds and simulates `request` (core's simulate_strategies, under `limit`) and
// prepares its index, facts and phases; one that offloads is timed under `time`. An inapplicable spec gives a run with
// `error` set; one longer than the limit, `too_large` too. Once `cancel` is
// set the rest is skipped (the caller drops the result).
std::shared_ptr<PreparedRun> prepare_run(std::shared_ptr<const Model> model, const StrategyRequest& request,
                                         const InstructionLimit& limit, const TimeModel& time = {},
                                         const std::atomic<bool>* cancel = nullptr);
// A placeholder for a spec still being computed or refused before any work.
std::shared_ptr<PreparedRun> placeholder_run(std::shared_ptr<const Model> model, const StrategyRequest& request,
                                             const std::string& why, bool pending);

}  // namespace remat
