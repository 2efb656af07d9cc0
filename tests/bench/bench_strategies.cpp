// Strategies at size: revolve on a 10^5-step chain with 100 slots, the budget
// DP on 1,000 unequal layers, the optimal search on transformer:12. Each
// iteration builds the schedule and simulates it (the validator included).
#include <benchmark/benchmark.h>

#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/nested_checkpoints.h"
#include "core/strategies/optimal.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

Model unequal_chain(int layers) {
  Model m;
  m.name = "unequal:" + std::to_string(layers);
  Op in;
  in.kind = OpKind::Input;
  in.shape = {1, 64};
  int prev = m.add(in);
  for (int i = 1; i < layers; ++i) {
    Op d;
    d.kind = OpKind::Dense;
    d.act = Activation::Tanh;
    d.inputs = {prev};
    d.shape = {1, int64_t{16} << (i * 7 % 5)};  // widths 16..256, uneven
    prev = m.add(d);
  }
  Op loss;
  loss.kind = OpKind::MSELoss;
  loss.inputs = {prev};
  m.add(loss);
  m.finalize();
  return m;
}

void BM_Revolve(benchmark::State& state) {
  const Model m = make_preset("chain:" + std::to_string(state.range(0)));
  const auto s = make_strategy("revolve:" + std::to_string(state.range(1)));
  for (auto _ : state) {
    const Simulation sim = simulate(m, s->schedule(m));
    state.counters["recompute_steps"] = static_cast<double>(sim.recompute_steps);
    state.counters["peak"] = static_cast<double>(sim.peak_bytes);
  }
}
BENCHMARK(BM_Revolve)->Args({100'000, 100})->Unit(benchmark::kMillisecond);

// budget:BYTES (nested DP) on unequal chains at a fraction (percent) of
// store-all's peak; single_pct: the single-level checkpoint-set DP at the
// same budget, for comparison.
void BM_BudgetDP(benchmark::State& state) {
  const Model m = unequal_chain(static_cast<int>(state.range(0)));
  const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
  const uint64_t budget = store * static_cast<uint64_t>(state.range(1)) / 100;
  const auto s = make_strategy("budget:" + std::to_string(budget));
  for (auto _ : state) {
    const Simulation sim = simulate(m, s->schedule(m));
    state.counters["overhead_pct"] = 100 * sim.overhead;
    state.counters["peak_over_budget"] = static_cast<double>(sim.peak_bytes) / static_cast<double>(budget);
  }
  std::vector<int> ckpt;
  if (chain_budget_dp(m, budget, ckpt))
    state.counters["single_pct"] = 100 * simulate(m, segment_schedule(m, ckpt, "single")).overhead;
  const NestedPlan plan = plan_nested_chain(m, budget);
  if (plan.found) state.counters["nested_pct"] = 100 * simulate(m, with_frees(m, plan.compute, "nested")).overhead;
  state.counters["proven"] = plan.proven;
  state.counters["unit"] = static_cast<double>(plan.unit);
  state.counters["candidates"] = plan.candidates;
}
BENCHMARK(BM_BudgetDP)
    ->Args({100, 25})->Args({300, 25})->Args({1000, 10})->Args({1000, 25})->Args({1000, 50})
    ->Unit(benchmark::kMillisecond);

void BM_OptimalTransformer(benchmark::State& state) {
  const Model m = make_preset("transformer:12");
  const uint64_t sqrt_peak = simulate(m, make_strategy("sqrt")->schedule(m)).peak_bytes;
  const double sqrt_flops = simulate(m, make_strategy("sqrt")->schedule(m)).recompute_flops;
  for (auto _ : state) {
    const OptimalResult r = optimal_search(m, sqrt_peak, 55);
    state.counters["evaluated"] = static_cast<double>(r.evaluated);
    state.counters["proven"] = r.proven;
    state.counters["flops_vs_sqrt"] = sqrt_flops > 0 ? r.recompute_flops / sqrt_flops : 0;
  }
}
BENCHMARK(BM_OptimalTransformer)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
