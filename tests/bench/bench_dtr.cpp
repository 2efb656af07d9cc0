// dtr (core/strategies/dtr.h) against the paper's claim and against optimal:
// - BM_DtrChain/N: chain:N under a budget of 2·ceil(√N) activations; the
//   counter fwd_per_n (forward steps over N, the forward pass included) must
//   not grow with N (Kirisame et al. 2021: O(N) operations on an O(√N) budget).
// - BM_DtrPlay/model: one play at 60% of store-all's peak, what the live mode
//   adds to a step (tests/bench/dtr_live_cost.sh).
// - BM_DtrVsOptimal/model/percent/heuristic: recompute overhead of dtr and of
//   optimal:BUDGET:10 at a budget of that percent of store-all's peak
//   (counters dtr_overhead, optimal_overhead, ratio).
// Reported, never asserted; run with tools/bench.sh or directly.
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <utility>
#include <string>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/dtr.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

void BM_DtrChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Model m = make_preset("chain:" + std::to_string(n) + ":4");
  const uint64_t unit = m.op(1).bytes;
  const uint64_t budget = 2 * static_cast<uint64_t>(std::ceil(std::sqrt(double(n)))) * unit;
  const auto h = static_cast<DtrHeuristic>(state.range(1));
  state.SetLabel(dtr_heuristic_names()[static_cast<std::size_t>(h)]);
  DtrPlay p;
  for (auto _ : state) p = play_dtr(m, budget, h);
  const Simulation s = simulate(m, p.schedule);
  state.counters["fwd_per_n"] = static_cast<double>(s.forward_steps) / n;
  state.counters["evictions"] = static_cast<double>(p.evictions.size());
  state.counters["fallbacks"] = static_cast<double>(p.fallbacks);
  state.counters["peak_units"] = static_cast<double>(s.peak_bytes) / static_cast<double>(unit);
}

// What deciding costs, alone: one play of the policy at 60% of store-all's
// peak on the models tests/bench/dtr_live_cost.sh runs live (the live mode
// adds this to each step, so it is that script's overhead over a replay).
const char* const kLiveModels[] = {"mlp:8:512:64", "transformer:2:128:4:64", "resnet:18:8:32:2:10"};

void BM_DtrPlay(benchmark::State& state) {
  const Model m = make_preset(kLiveModels[state.range(0)]);
  const uint64_t budget = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes * 60 / 100;
  state.SetLabel(kLiveModels[state.range(0)]);
  DtrPlay p;
  for (auto _ : state) p = play_dtr(m, budget, DtrHeuristic::HDtr);
  state.counters["instructions"] = static_cast<double>(p.schedule.code.size());
  state.counters["evictions"] = static_cast<double>(p.evictions.size());
}

const char* const kModels[] = {"gpt:12", "resnet:50", "transformer:12"};

void BM_DtrVsOptimal(benchmark::State& state) {
  const Model m = make_preset(kModels[state.range(0)]);
  const double percent = static_cast<double>(state.range(1));
  const auto h = static_cast<DtrHeuristic>(state.range(2));
  const uint64_t budget =
      static_cast<uint64_t>(static_cast<double>(simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes) *
                            percent / 100.0);
  state.SetLabel(std::string(kModels[state.range(0)]) + " " + std::to_string(state.range(1)) + "% " +
                 dtr_heuristic_names()[static_cast<std::size_t>(h)]);
  double dtr = -1;
  for (auto _ : state) {
    try {
      dtr = simulate(m, play_dtr(m, budget, h).schedule).overhead;
    } catch (const InputError&) {
      dtr = -1;  // below what dtr can fit
    }
  }
  // One optimal search per model and budget, shared by the heuristics' rows.
  static std::map<std::pair<int64_t, int64_t>, double> optimal;
  const auto key = std::pair{state.range(0), state.range(1)};
  if (!optimal.contains(key)) {
    optimal[key] = -1;
    try {
      optimal[key] = simulate(m, make_strategy("optimal:" + std::to_string(budget) + ":10")->schedule(m)).overhead;
    } catch (const InputError&) {
    }
  }
  const double opt = optimal[key];
  state.counters["dtr_overhead"] = dtr;
  state.counters["optimal_overhead"] = opt;
  state.counters["ratio"] = dtr >= 0 && opt > 0 ? dtr / opt : -1;
}

void vs_optimal_args(benchmark::internal::Benchmark* b) {
  for (int model = 0; model < 3; ++model)
    for (int percent : {90, 70, 50, 30})
      for (int h = 0; h < 4; ++h) b->Args({model, percent, h});
}

}  // namespace

BENCHMARK(BM_DtrChain)->ArgsProduct({{100, 400, 1600}, {0, 1, 2, 3}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DtrPlay)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DtrVsOptimal)->Apply(vs_optimal_args)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
