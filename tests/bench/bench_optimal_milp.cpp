// optimal:BYTES on graphs (issue 13's benchmark): the residency bound, the
// branch and bound and the MILP behind one name, at 80% and 90% of store-all's
// peak, 60 s in all per solve. Reported per model and budget: wall time, which
// solver's schedule was chosen, each solver's status, the chosen schedule's
// gap from the best bound over general schedules (0: proven least),
// recompute overhead. Measured once each (Iterations(1)): the solves are long
// and their time is the figure.
//
//   build/tests/bench/bench_optimal_milp [--benchmark_filter=vgg]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_schedule.h"
#include "core/strategies/optimal_schedule.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

constexpr double kSeconds = 60;

Op make(OpKind k, const std::string& name, std::vector<int> in) {
  Op o;
  o.kind = k;
  o.name = name;
  o.inputs = std::move(in);
  return o;
}

int conv(Model& m, const std::string& name, int x, int64_t out, int64_t k, int64_t stride) {
  Op c = make(OpKind::Conv, name, {x});
  c.attrs.edit().channels = out;
  c.attrs.edit().kernel = {k, k};
  c.attrs.edit().stride = {stride, stride};
  c.attrs.edit().pads.assign(4, k / 2);
  return m.add(std::move(c));
}

int pool(Model& m, const std::string& name, int x, int64_t k, int64_t stride, int64_t pad) {
  Op p = make(OpKind::MaxPool, name, {x});
  p.attrs.edit().kernel = {k, k};
  p.attrs.edit().stride = {stride, stride};
  p.attrs.edit().pads.assign(4, pad);
  return m.add(std::move(p));
}

int classifier_and_loss(Model& m, int x, int64_t features, std::vector<int64_t> hidden, int64_t batch) {
  Op flat = make(OpKind::Reshape, "flatten", {x});
  flat.shape = {batch, features};
  x = m.add(std::move(flat));
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    Op fc = make(OpKind::Linear, "fc" + std::to_string(i + 1), {x});
    fc.shape = {batch, hidden[i]};
    x = m.add(std::move(fc));
    if (i + 1 < hidden.size()) x = m.add(make(OpKind::ReLU, "fc_relu" + std::to_string(i + 1), {x}));
  }
  return m.add(make(OpKind::MSELoss, "loss", {x}));
}

// VGG-16 (configuration D) on 8 images of 64x64: 13 conv3x3+ReLU, 5 max
// pools, flatten (a view), three Linear layers (two ReLUs), MSE loss: 39 ops
// with the input.
Model vgg16() {
  Model m;
  m.name = "vgg16 (64x64, batch 8)";
  Op in = make(OpKind::Input, "x", {});
  in.shape = {8, 3, 64, 64};
  int x = m.add(std::move(in));
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  int i = 0;
  for (int64_t c : cfg) {
    ++i;
    if (c == 0) {
      x = pool(m, "pool" + std::to_string(i), x, 2, 2, 0);
    } else {
      x = conv(m, "conv" + std::to_string(i), x, c, 3, 1);
      x = m.add(make(OpKind::ReLU, "relu" + std::to_string(i), {x}));
    }
  }
  classifier_and_loss(m, x, 512 * 2 * 2, {512, 512, 10}, 8);
  m.finalize();
  return m;
}

Model model_of(int which) {
  switch (which) {
    case 0: return make_preset("transformer:2");
    case 1: return make_preset("transformer:4");
    case 2: return make_preset("transformer:12");
    case 3: return vgg16();
    // torchvision's ResNet-50 (bottlenecks [3, 4, 6, 3]) at width 16 on 8
    // images of 64x64: 177 ops, batch norm and max pool aux, a flatten view.
    default: return make_preset("resnet:50:16:64:8:10");
  }
}

void BM_OptimalMilp(benchmark::State& state) {
  const Model m = model_of(static_cast<int>(state.range(0)));
  const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
  const uint64_t budget = store * static_cast<uint64_t>(state.range(1)) / 100;
  const std::string label = m.name + " ops=" + std::to_string(m.size()) + " budget=" + std::to_string(state.range(1)) + "%";
  state.SetLabel(label);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const OptimalOutcome o = optimal_schedule(m, budget, kSeconds);
    state.counters["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.counters["found"] = o.found;
    state.counters["chosen"] = o.from_milp ? 1 : o.from_residency ? 2 : 0;  // 0 branch and bound, 1 MILP, 2 residency bound
    state.counters["bb_proven"] = o.sets.proven;
    state.counters["milp_status"] = static_cast<double>(o.milp.status);  // 0 not run, 1 proven, 2 time limit (gap), 3 infeasible, 4 none found, 5 too large
    state.counters["rb_status"] = static_cast<double>(o.residency.status);  // 1 solved, 2 time limit, 3 infeasible
    state.counters["rb_s"] = o.residency.seconds;
    // The chosen schedule's distance from the best bound over general
    // schedules (the MILP's or the residency bound's; not the branch and
    // bound's, which is over checkpoint sets only): 0 is proven least.
    double general = -1;
    for (const SolverRecord& r : o.records)
      if (r.family == "general schedules") general = std::max(general, r.bound);
    const double step = m.forward_flops() + m.backward_flops() + o.recompute_flops;
    state.counters["gap_pct"] = general >= 0 && o.found ? 100 * std::max(0.0, o.recompute_flops - general) / o.recompute_flops : -1;
    state.counters["step_gap_pct"] = general >= 0 && o.found ? 100 * std::max(0.0, o.recompute_flops - general) / step : -1;
    if (o.milp.status == MilpResult::Status::TooLarge) state.SetLabel(label + " MILP too large: " + o.milp.note);
    state.counters["milp_s"] = o.milp.seconds;
    state.counters["nonzeros"] = static_cast<double>(o.milp.nonzeros);  // 0 when not built (too large: the label says why)
    if (o.found) {
      const double one_pass = m.forward_flops() + m.backward_flops();
      state.counters["overhead_pct"] = 100 * o.recompute_flops / one_pass;
      state.counters["bb_overhead_pct"] = o.sets.found ? 100 * o.sets.recompute_flops / one_pass : -1;
      state.counters["rb_overhead_pct"] = o.residency.fits ? 100 * o.residency.recompute_flops / one_pass : -1;
    }
  }
}
BENCHMARK(BM_OptimalMilp)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {80, 90}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
