// optimal:BYTES on real networks (issue 29's benchmark): GPT-2, ResNet and
// transformer presets at the peak of the hand-written policy practitioners
// use on them (attention-core on GPTs, blocks elsewhere), with the whole
// solve's wall time, the schedule's peak and recompute overhead beside the
// policy's, the lower bound's overhead over general schedules and the ratio
// found / bound; then budget fronts (10 budgets from store-all's peak down to
// the least peak of any registered strategy), counting the budgets where some
// registered strategy fits and recomputes less than optimal (goal: none);
// then the window's Trade-off sweep on gpt:12 as its SweepController runs it.
// Measured once each (Iterations(1)): the solves are long and their time is
// the figure. Overheads are recompute FLOPs over one forward plus one
// backward pass, in percent. After the runs, the policy-peak rows are printed
// again as issue 29's table (Markdown): wall seconds, peak, overhead, bound,
// found/bound and gap = (found - bound) / found, with what proved the answer.
//
//   build/tests/bench/bench_optimal_blocks [--benchmark_filter=AtPolicy]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/analysis/sweep.h"
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/optimal_schedule.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const char* const kModels[] = {"gpt:12", "gpt:48:1600:25:1024", "resnet:50", "resnet:152", "transformer:12"};

std::string policy_of(const std::string& model) { return model.starts_with("gpt") ? "attention-core" : "blocks"; }

// The chosen schedule's solver record's bound, or the best bound any record has.
double best_bound(const OptimalOutcome& o) {
  double b = -1;
  for (const SolverRecord& r : o.records) b = std::max(b, r.bound);
  return b;
}

// One row of the table printed after the runs.
struct Row {
  std::string model, policy, chosen;
  int ops = 0;
  double limit = 0, wall = 0, peak_mib = 0, policy_peak_mib = 0, overhead = 0, policy_overhead = 0, bound = -1;
  std::string proven;  // over general schedules (found meets the bound), over checkpoint sets, or no
};
std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}

// Which solver's schedule optimal returned, in words.
std::string chosen_text(const OptimalOutcome& o) {
  if (o.from_named) return "registered " + o.from_named->str();
  if (o.from_first_step) return "first step's schedule";
  if (o.from_residency) return "residency bound's schedule";
  if (o.from_milp) return "MILP";
  return o.blocks.found && o.sets.found && o.sets.recompute_flops == o.blocks.recompute_flops ? "block DP's set" : "branch and bound";
}

// optimal:PEAK:SECONDS at the policy's peak.
void BM_AtPolicyPeak(benchmark::State& state) {
  const std::string spec = kModels[state.range(0)];
  const double seconds = static_cast<double>(state.range(1));
  const Model m = make_preset(spec);
  const std::string policy = policy_of(spec);
  const Simulation p = simulate(m, make_strategy(policy)->schedule(m), {.timeline = false});
  state.SetLabel(spec + " (" + std::to_string(m.size()) + " ops) at " + policy + "'s peak, optimal:B:" +
                 std::to_string(static_cast<int>(seconds)));
  const double pass = m.forward_flops() + m.backward_flops();
  for (auto _ : state) {
    const auto start = Clock::now();
    const OptimalOutcome o = optimal_schedule(m, p.peak_bytes, seconds);
    state.counters["wall_s"] = seconds_since(start);
    if (!o.found) {
      state.SkipWithError("no schedule found");
      continue;
    }
    const Simulation s = simulate(m, with_frees(m, o.compute, "optimal"), {.timeline = false});
    const double bound = best_bound(o);
    state.counters["peak_MiB"] = s.peak_bytes / 1048576.0;
    state.counters["policy_peak_MiB"] = p.peak_bytes / 1048576.0;
    state.counters["overhead_%"] = 100 * s.recompute_flops / pass;
    state.counters["policy_overhead_%"] = 100 * p.recompute_flops / pass;
    state.counters["bound_overhead_%"] = bound >= 0 ? 100 * bound / pass : -1;
    state.counters["found/bound"] = bound > 0 ? s.recompute_flops / bound : -1;
    state.counters["gap_%"] = bound >= 0 && s.recompute_flops > 0 ? 100 * (s.recompute_flops - bound) / s.recompute_flops : -1;
    state.counters["blocks_s"] = o.blocks.seconds;
    state.counters["not_above_policy"] = s.recompute_flops <= p.recompute_flops && s.peak_bytes <= p.peak_bytes;
    // 0 branch and bound (from the block DP's set), 1 MILP, 2 residency bound, 3 a registered strategy, 4 the first step's
    state.counters["chosen"] = o.from_milp ? 1 : o.from_residency ? 2 : o.from_named ? 3 : o.from_first_step ? 4 : 0;
    const bool general = bound >= 0 && meets_bound(s.recompute_flops, bound);
    state.counters["proven"] = general ? 2 : o.note.empty() ? 1 : 0;  // 2 over general schedules, 1 over checkpoint sets
    rows().push_back({spec, policy, chosen_text(o), m.size(), seconds, state.counters["wall_s"], s.peak_bytes / 1048576.0,
                      p.peak_bytes / 1048576.0, 100 * s.recompute_flops / pass, 100 * p.recompute_flops / pass,
                      bound >= 0 ? 100 * bound / pass : -1, general ? "general schedules" : o.note.empty() ? "checkpoint sets" : "no"});
  }
}
BENCHMARK(BM_AtPolicyPeak)
    ->Args({0, 10})
    ->Args({0, 60})
    ->Args({1, 60})
    ->Args({2, 60})
    ->Args({3, 60})
    ->Args({4, 60})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

// The registered strategies a front is held to (each applies or is skipped).
std::vector<std::string> registered(const Model& m) {
  std::vector<std::string> s{"store-all", "recompute-all", "sqrt", "auto", "selective", "attention-core", "blocks", "blocks:2"};
  for (int k : {2, 3, 4, 8, 16, 32}) s.push_back("every-k:" + std::to_string(k));
  (void)m;
  return s;
}

// 10 budgets from store-all's peak down to the least peak of the registered
// strategies; at each, optimal:B:SECONDS against every registered strategy
// that fits B.
void BM_Front(benchmark::State& state) {
  const std::string spec = kModels[state.range(0)];
  const double seconds = static_cast<double>(state.range(1));
  const Model m = make_preset(spec);
  struct Point {
    std::string spec;
    uint64_t peak;
    double flops;
  };
  std::vector<Point> named;
  for (const std::string& s : registered(m)) {
    try {
      const Simulation sim = simulate(m, make_strategy(s)->schedule(m), {.timeline = false});
      named.push_back({s, sim.peak_bytes, sim.recompute_flops});
    } catch (const InputError&) {
    }
  }
  uint64_t hi = 0, lo = UINT64_MAX;
  for (const Point& p : named) {
    if (p.spec == "store-all") hi = p.peak;
    lo = std::min(lo, p.peak);
  }
  state.SetLabel(spec + ": 10 budgets, optimal:B:" + std::to_string(static_cast<int>(seconds)) + " each");
  for (auto _ : state) {
    const auto start = Clock::now();
    int above = 0, infeasible = 0;
    double worst = 0;  // the largest wall time of one budget
    for (int i = 0; i < 10; ++i) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(i) / 9;
      const auto t = Clock::now();
      const OptimalOutcome o = optimal_schedule(m, budget, seconds);
      worst = std::max(worst, seconds_since(t));
      if (!o.found) {
        ++infeasible;
        continue;
      }
      const Simulation s = simulate(m, with_frees(m, o.compute, "optimal"), {.timeline = false});
      if (s.peak_bytes > budget) ++above;
      for (const Point& p : named)
        if (p.peak <= budget && p.flops < s.recompute_flops) {
          ++above;
          std::fprintf(stderr, "%s at %llu: %s recomputes %.4g < optimal's %.4g\n", spec.c_str(),
                       static_cast<unsigned long long>(budget), p.spec.c_str(), p.flops, s.recompute_flops);
        }
    }
    state.counters["wall_s"] = seconds_since(start);
    state.counters["worst_budget_s"] = worst;
    state.counters["above"] = above;
    state.counters["infeasible"] = infeasible;
  }
}
BENCHMARK(BM_Front)->Args({0, 5})->Args({2, 5})->Args({4, 5})->Iterations(1)->Unit(benchmark::kSecond);

// The window's sweep (widgets/controllers/sweep_controller.cpp): named points, then
// auto_budgets at 0.25 s of optimal per budget.
void BM_WindowSweep(benchmark::State& state) {
  const Model m = make_preset("gpt:12");
  for (auto _ : state) {
    const auto start = Clock::now();
    SweepOptions o;
    o.optimal_seconds = 0.25;
    o.named = named_points(m, o.limit, &o.notes);
    const auto budgets = auto_budgets(o.named);
    const SweepResult r = sweep(m, budgets, o);
    state.counters["wall_s"] = seconds_since(start);
    state.counters["budgets"] = static_cast<double>(r.budgets.size());
    state.counters["named"] = static_cast<double>(r.named.size());
  }
  state.SetLabel("gpt:12, the window's Trade-off sweep");
}
BENCHMARK(BM_WindowSweep)->Iterations(1)->Unit(benchmark::kSecond);

// Issue 29's table, from the BM_AtPolicyPeak rows that ran.
void print_table() {
  if (rows().empty()) return;
  std::printf("\n| model | ops | limit | wall s | peak MiB | policy's peak MiB | overhead | policy's | bound | found/bound | gap | "
              "chosen | proven |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows()) {
    char bound[32] = "-", ratio[32] = "-", gap[32] = "-";
    if (r.bound >= 0) {
      std::snprintf(bound, sizeof bound, "%.4f%%", r.bound);
      if (r.bound > 0) std::snprintf(ratio, sizeof ratio, "%.3f", r.overhead / r.bound);
      if (r.overhead > 0) std::snprintf(gap, sizeof gap, "%.1f%%", 100 * std::max(0.0, r.overhead - r.bound) / r.overhead);
    }
    std::printf("| %s at %s's peak | %d | %.0f s | %.1f | %.3f | %.3f | %.4f%% | %.4f%% | %s | %s | %s | %s | %s |\n",
                r.model.c_str(), r.policy.c_str(), r.ops, r.limit, r.wall, r.peak_mib, r.policy_peak_mib, r.overhead,
                r.policy_overhead, bound, ratio, gap, r.chosen.c_str(), r.proven.c_str());
  }
  std::printf("overhead: recompute FLOPs over one forward and backward pass; bound: the best lower bound over general\n"
              "schedules, as overhead; found/bound = overhead / bound; gap = (found - bound) / found; proven: least over\n"
              "general schedules (found meets the bound), least over checkpoint sets (the branch and bound finished), or no.\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table();
  return 0;
}
