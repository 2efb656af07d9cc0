// Schedule + simulate chain:N for the seed strategies (issue: all three at
// N = 10^6 under 1 s on the 2-core machine). recompute-all's schedule has
// N(N-1)/2 recomputations, 5*10^11 instructions at 10^6, so it is measured up
// to N = 10^4 only (its length, not the code, is the limit).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "core/presets.h"
#include "core/simulator.h"
#include "core/strategies/registry.h"

namespace {

const remat::Model& chain(int n) {
  static std::map<int, std::unique_ptr<remat::Model>> cache;  // building 10^6 ops is not what we time
  auto& m = cache[n];
  if (!m) m = std::make_unique<remat::Model>(remat::make_preset("chain:" + std::to_string(n)));
  return *m;
}

void run(benchmark::State& state, const char* spec) {
  const remat::Model& m = chain(static_cast<int>(state.range(0)));
  const auto strategy = remat::make_strategy(spec);
  std::size_t instructions = 0;
  for (auto _ : state) {
    const remat::Schedule s = strategy->schedule(m);
    const remat::Simulation sim = remat::simulate(m, s);
    benchmark::DoNotOptimize(sim.peak_bytes);
    instructions = s.code.size();
  }
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["ns/instr"] = benchmark::Counter(static_cast<double>(instructions) * state.iterations(),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void StoreAll(benchmark::State& s) { run(s, "store-all"); }
void Sqrt(benchmark::State& s) { run(s, "sqrt"); }
void RecomputeAll(benchmark::State& s) { run(s, "recompute-all"); }

}  // namespace

BENCHMARK(StoreAll)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(Sqrt)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(RecomputeAll)->RangeMultiplier(10)->Range(1000, 10000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
