// The families of strategies the Trade-off tab places beside recompute's
// staircase: each a name for the legend, a marker shape and the specs it
// tries on a model, made from sqrt's interval K on that model (4 on
// chain:16: offload:{K/2}, offload+sqrt, offload:{2K}) or from store-all's
// peak P (dtr at 80, 60 and 40% of P). A family is one line in the table
// (offload; compressed checkpoints, "sqrt+compress:bf16"; dtr).
// Each point sits at (peak device bytes, step-time overhead): the time
// model's step time (core/sim/time_model.h, the window's rates) over the step without
// recomputation, minus one. For a schedule that only recomputes this is
// exactly the recompute overhead the staircase plots, so the families share
// the y axis; offload's stalls add to it.
#pragma once
#include <QScatterSeries>
#include <QString>
#include <atomic>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/sim/instruction_limit.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace remat {

// What a family's specs are made from, on one model.
struct FamilyScale {
  int k = 1;                    // sqrt's interval
  uint64_t store_all_peak = 0;  // store-all's simulated peak
};

struct TradeoffFamily {
  const char* name;  // the legend's entry
  QScatterSeries::MarkerShape shape;
  std::vector<StrategySpec> (*specs)(const FamilyScale& scale);  // the specs on a model of that scale
};

// The table (recompute's own points come from the sweep: not listed).
const std::vector<TradeoffFamily>& tradeoff_families();
// The family's specs on this model, printed, duplicates dropped.
std::vector<StrategySpec> family_specs(const TradeoffFamily& family, const Model& model);

struct FamilyPoint {
  std::string family;
  StrategySpec spec;
  uint64_t peak = 0;       // device
  uint64_t host_peak = 0;  // offloaded bytes at once
  double overhead = 0;     // step-time overhead (above)
  double stall_s = 0;
};

// Step time over the time without recomputation, minus one, under `time`:
// (sim.flops - sim.recompute_flops) / device FLOP/s is that time.
double step_time_overhead(const Simulation& sim, double device_flops);

// Every family's points on `model`, simulated with the time model `time`; a spec that
// does not apply or is too long is left out, with a line in `notes`. Stops
// early (returning what is done) once `cancel` is set.
std::vector<FamilyPoint> family_points(const Model& model, const InstructionLimit& limit,
                                       const std::atomic<bool>* cancel = nullptr,
                                       std::vector<std::string>* notes = nullptr, const TimeModel& time = {});

}  // namespace remat
