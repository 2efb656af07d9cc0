// Loading models: the JSON model format at 10^4 .. 10^6 ops (the parser must
// stay linear: a callback-based first version took 5 minutes for a million).
#include <benchmark/benchmark.h>

#include <string>

#include "core/io/json_model.h"
#include "core/model/presets.h"

namespace {

void json_load(benchmark::State& state) {
  const auto n = state.range(0);
  const std::string text = remat::model_to_json(remat::make_preset("chain:" + std::to_string(n))).dump();
  for (auto _ : state) {
    const remat::Model m = remat::parse_json_model(text, "chain.json");
    benchmark::DoNotOptimize(m.size());
  }
  state.SetComplexityN(n);
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(json_load)->RangeMultiplier(10)->Range(10'000, 1'000'000)->Unit(benchmark::kMillisecond)->Complexity();

}  // namespace

BENCHMARK_MAIN();
