// Schedule + simulate chain:N for the seed strategies (issue 18: chain:10^6
// under store-all and sqrt within a second end to end, simulation at 50 M
// instructions per second or more), simulate() alone on a ready schedule, and
// building the chain. recompute-all's schedule has N(N-1)/2 recomputations,
// 5*10^11 instructions at 10^6, so it is measured up to N = 10^4 only (its
// length, not the code, is the limit). The user's commands, start-up and
// printing included, are timed by commands.sh beside this file.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace {

const remat::Model& chain(int n) {
  static std::map<int, std::unique_ptr<remat::Model>> cache;  // building 10^6 ops is timed on its own below
  auto& m = cache[n];
  if (!m) m = std::make_unique<remat::Model>(remat::make_preset("chain:" + std::to_string(n)));
  return *m;
}

void per_instruction(benchmark::State& state, std::size_t instructions) {
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["ns/instr"] = benchmark::Counter(static_cast<double>(instructions) * state.iterations(),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
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
  per_instruction(state, instructions);
}

// simulate() alone, with its timeline (as the window and --json keep it).
void simulate_only(benchmark::State& state, const char* spec) {
  const remat::Model& m = chain(static_cast<int>(state.range(0)));
  const remat::Schedule s = remat::make_strategy(spec)->schedule(m);
  for (auto _ : state) {
    const remat::Simulation sim = remat::simulate(m, s);
    benchmark::DoNotOptimize(sim.peak_bytes);
  }
  per_instruction(state, s.code.size());
}

void StoreAll(benchmark::State& s) { run(s, "store-all"); }
void Sqrt(benchmark::State& s) { run(s, "sqrt"); }
void RecomputeAll(benchmark::State& s) { run(s, "recompute-all"); }
void SimulateOnlySqrt(benchmark::State& s) { simulate_only(s, "sqrt"); }
void SimulateOnlyRecomputeAll(benchmark::State& s) { simulate_only(s, "recompute-all"); }

void BuildChain(benchmark::State& state) {
  const std::string spec = "chain:" + std::to_string(state.range(0));
  for (auto _ : state) {
    const remat::Model m = remat::make_preset(spec);
    benchmark::DoNotOptimize(m.size());
  }
  state.counters["ns/op"] = benchmark::Counter(static_cast<double>(state.range(0)) * state.iterations(),
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(StoreAll)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(Sqrt)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(RecomputeAll)->RangeMultiplier(10)->Range(1000, 10000)->Unit(benchmark::kMillisecond);
BENCHMARK(SimulateOnlySqrt)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(SimulateOnlyRecomputeAll)->Arg(3000)->Unit(benchmark::kMillisecond);
BENCHMARK(BuildChain)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
