#include "widgets/views/tradeoff_families.h"

#include <algorithm>

#include "core/analysis/comparison.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/sim/time_model.h"
#include "core/strategies/registry.h"

namespace remat {

const std::vector<TradeoffFamily>& tradeoff_families() {
  static const std::vector<TradeoffFamily> table = {
      {"offload (checkpoints on the host)", QScatterSeries::MarkerShapeTriangle,
       // offload+sqrt is offload:{K} (the same schedule): listed once.
       [](const FamilyScale& s) {
         const int k = s.k;
         return std::vector<StrategySpec>{strategy_spec("offload", {std::max(1, k / 2)}),
                                          wrapped_spec("offload", strategy_spec("sqrt")), strategy_spec("offload", {2 * k})};
       }},
      {"compressed checkpoints", QScatterSeries::MarkerShapeStar,
       [](const FamilyScale&) {
         return std::vector<StrategySpec>{modified_spec(strategy_spec("sqrt"), "compress", "bf16"),
                                          modified_spec(strategy_spec("sqrt"), "compress", "int8")};
       }},
      // Deciding while the step runs, at budgets the other points sit near.
      {"dtr (decides while running)", QScatterSeries::MarkerShapePentagon,
       [](const FamilyScale& s) {
         std::vector<StrategySpec> out;
         for (uint64_t percent : {80, 60, 40})
           if (const uint64_t b = s.store_all_peak * percent / 100; b > 0)
             out.push_back(strategy_spec("dtr", {static_cast<int64_t>(b)}));
         return out;
       }},
  };
  return table;
}

std::vector<StrategySpec> family_specs(const TradeoffFamily& family, const Model& model) {
  std::vector<StrategySpec> out;
  FamilyScale scale;
  scale.k = std::max(1, sqrt_interval(model));
  if (model.size() > 1) scale.store_all_peak = simulate(model, make_strategy("store-all")->schedule(model)).peak_bytes;
  for (const StrategySpec& spec : family.specs(scale))
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(spec);
  return out;
}

double step_time_overhead(const Simulation& sim, double device_flops) {
  const double plain = (sim.flops - sim.recompute_flops) / device_flops;
  return plain > 0 ? sim.time.step_s / plain - 1 : 0;
}

std::vector<FamilyPoint> family_points(const Model& model, const InstructionLimit& limit,
                                       const std::atomic<bool>* cancel, std::vector<std::string>* notes,
                                       const TimeModel& tm) {
  std::vector<FamilyPoint> out;
  for (const TradeoffFamily& f : tradeoff_families()) {
    for (const StrategySpec& spec : family_specs(f, model)) {
      if (cancel && cancel->load()) return out;
      const auto runs = simulate_requests(model, {request_strategy(spec)},
                                          {.limit = limit, .timelines = false, .time = tm});
      const StrategyRun& r = runs.front();
      if (!r.ok()) {
        if (notes) notes->push_back(spec.str() + ": " + r.error);
        continue;
      }
      out.push_back({f.name, spec, r.sim.peak_bytes, r.sim.peak_host_bytes,
                     step_time_overhead(r.sim, tm.device_flops), r.sim.time.stall_s});
    }
  }
  return out;
}

}  // namespace remat
