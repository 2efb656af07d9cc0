// Executing schedules on the CPU backend.
// 1. Time of store-all vs sqrt vs recompute-all on MLPs: √n checkpointing
//    should cost about one extra forward, i.e. a ratio near
//    1 + F/(F+B) (F, B: one forward and one backward pass's FLOPs).
// 2. Interpreter overhead: the executor's store-all against the same kernels
//    called in a plain loop on preallocated buffers (width >= 1024, where the
//    GEMMs dominate, and a narrow model, where per-instruction costs show).
// Prints a summary table after Google Benchmark's own.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/exec/cpu_backend.h"
#include "core/exec/executor.h"
#include "core/kernels/cpu_kernels.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace {

struct Loaded {
  remat::Model model;
  remat::HostData data;
  remat::CpuBackend cpu;
};

Loaded& loaded(const std::string& spec) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& l = cache[spec];
  if (!l) {
    l = std::make_unique<Loaded>();
    l->model = remat::make_preset(spec);
    l->data = remat::make_host_data(l->model, 1);
    l->cpu.load(l->model, l->data);
  }
  return *l;
}

std::map<std::string, std::map<std::string, double>> g_ms;  // model -> column -> best median ms

void note(const std::string& model, const std::string& column, double ms) {
  auto& v = g_ms[model][column];
  if (v == 0 || ms < v) v = ms;
}

void execute(benchmark::State& state, const std::string& spec, const std::string& strategy) {
  Loaded& l = loaded(spec);
  const remat::Schedule s = remat::make_strategy(strategy)->schedule(l.model);
  const remat::Simulation sim = remat::simulate(l.model, s);
  remat::ExecOptions o;
  o.seed = 1;
  o.repeat = 1;
  double share = 0;
  for (auto _ : state) {
    const remat::ExecResult r = remat::execute_loaded(l.model, s, l.cpu, l.data, o);
    if (!r.ok()) state.SkipWithError(r.message.c_str());
    state.SetIterationTime(r.time_ms / 1000.0);  // the timed run, not the warm-up
    share = r.recompute_share;
    note(spec, strategy, r.time_ms);
  }
  g_ms[spec]["pred " + strategy] = 1 + sim.overhead;
  state.counters["peak_KiB"] = static_cast<double>(sim.peak_bytes) / 1024.0;
  state.counters["recompute_share"] = share;
  state.counters["sim_overhead"] = sim.overhead;
}

// store-all of an mlp preset with the kernels called directly: one buffer per
// activation and gradient, allocated once.
// Alternates the raw loop and the executor's store-all (interleaved, so that the
// shared machine's drift hits both alike) and keeps the best of each.
// 64-byte aligned like the CPU backend's buffers, so alignment is not what differs.
struct Buf {
  std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
  void resize(std::size_t n) { p.reset(static_cast<float*>(std::aligned_alloc(64, (4 * n + 63) / 64 * 64))); }
  float* data() const { return p.get(); }
};

struct RawLoop {
  explicit RawLoop(Loaded& l);
  double step_ms();
  Loaded& l;
  std::vector<Buf> A, G;
  std::vector<std::vector<float>> dparams;
  Buf scratch;
};

void raw_mlp(benchmark::State& state, const std::string& spec) {
  Loaded& l = loaded(spec);
  RawLoop raw(l);
  const remat::Schedule s = remat::make_strategy("store-all")->schedule(l.model);
  remat::ExecOptions o;
  o.repeat = 1;
  double best_raw = 1e300, best_exec = 1e300;
  for (auto _ : state) {
    const double ms = raw.step_ms();
    state.SetIterationTime(ms / 1000.0);
    best_raw = std::min(best_raw, ms);
    best_exec = std::min(best_exec, remat::execute_loaded(l.model, s, l.cpu, l.data, o).time_ms);
  }
  note(spec, "raw kernels", best_raw);
  note(spec, "interleaved store-all", best_exec);
  state.counters["executor_ms"] = best_exec;
  state.counters["interp_overhead"] = best_exec / best_raw - 1;
}

RawLoop::RawLoop(Loaded& loaded_model) : l(loaded_model) {
  const remat::Model& m = l.model;
  const int n = m.size();
  A.resize(static_cast<std::size_t>(n));
  G.resize(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) {
    A[static_cast<std::size_t>(v)].resize(static_cast<std::size_t>(m.op(v).numel()));
    G[static_cast<std::size_t>(v)].resize(static_cast<std::size_t>(m.op(v).numel()));
  }
  std::copy(l.data.input.begin(), l.data.input.end(), A[0].data());
  dparams.resize(l.data.params.size());
  for (std::size_t k = 0; k < dparams.size(); ++k) dparams[k].assign(l.data.params[k].size(), 0.0f);
  scratch.resize(static_cast<std::size_t>(m.op(0).numel()));
}

double RawLoop::step_ms() {
  const remat::Model& m = l.model;
  const int n = m.size();
  {
    for (auto& d : dparams) std::fill(d.begin(), d.end(), 0.0f);  // outside the timing, as in the executor
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t p = 0;
    float loss = 0;
    for (int v = 1; v < n; ++v) {  // forward: Linear, ReLU, ..., MSE
      const remat::Op& op = m.op(v);
      const auto& x = A[static_cast<std::size_t>(op.inputs[0])];
      auto& y = A[static_cast<std::size_t>(v)];
      const remat::Op& in = m.op(op.inputs[0]);
      if (op.kind == remat::OpKind::Linear) {
        remat::cpu::linear_fwd(x.data(), l.data.params[p].data(), l.data.params[p + 1].data(), y.data(), in.rows(),
                               in.cols(), op.cols());
        p += 2;
      } else if (op.kind == remat::OpKind::ReLU) {
        remat::cpu::act_fwd(remat::cpu::Act::ReLU, x.data(), y.data(), op.numel());
      } else {
        loss = remat::cpu::mse_fwd(x.data(), l.data.target.data(), in.numel());
      }
    }
    for (int v = n - 1; v >= 1; --v) {  // backward
      const remat::Op& op = m.op(v);
      const int u = op.inputs[0];
      const remat::Op& in = m.op(u);
      float* dx = u == 0 ? scratch.data() : G[static_cast<std::size_t>(u)].data();
      if (op.kind == remat::OpKind::MSELoss) {
        remat::cpu::mse_bwd(A[static_cast<std::size_t>(u)].data(), l.data.target.data(), dx, in.numel(), false);
      } else if (op.kind == remat::OpKind::ReLU) {
        remat::cpu::act_bwd(remat::cpu::Act::ReLU, A[static_cast<std::size_t>(v)].data(),
                            G[static_cast<std::size_t>(v)].data(), dx, op.numel(), false);
      } else {
        p -= 2;
        remat::cpu::linear_bwd(A[static_cast<std::size_t>(u)].data(), l.data.params[p].data(),
                               G[static_cast<std::size_t>(v)].data(), dx, dparams[p].data(), dparams[p + 1].data(),
                               in.rows(), in.cols(), op.cols(), false);
      }
    }
    benchmark::DoNotOptimize(loss);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return ms;
  }
}

const char* kModels[] = {"mlp:16:1024:64", "mlp:8:2048:32", "mlp:64:64:8", "transformer:4:256:64:2"};

void register_all() {
  for (const char* spec : kModels) {
    for (const char* strategy : {"store-all", "sqrt", "recompute-all"}) {
      if (std::string(strategy) == "recompute-all" && std::string(spec) == "mlp:64:64:8") continue;  // O(n²), not the point
      benchmark::RegisterBenchmark((std::string("execute/") + spec + "/" + strategy).c_str(),
                                   [spec, strategy](benchmark::State& s) { execute(s, spec, strategy); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(std::string(spec).find("1024") != std::string::npos || std::string(spec).find("2048") != std::string::npos ? 3 : 20);
    }
    if (std::string(spec).starts_with("mlp:"))
      benchmark::RegisterBenchmark((std::string("raw_kernels/") + spec).c_str(),
                                   [spec](benchmark::State& s) { raw_mlp(s, spec); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(std::string(spec).find("64:8") != std::string::npos ? 30 : 6);
  }
}

void print_summary() {
  std::printf("\n%-24s %10s %10s %10s %8s %9s %10s %10s %8s\n", "model", "store-all", "sqrt", "recomp-all", "sqrt/SA",
              "flops 1+o", "1+F/(F+B)", "raw kern", "interp");
  for (const char* spec : kModels) {
    auto& c = g_ms[spec];
    if (!c.count("store-all")) continue;  // filtered out
    const remat::Model& m = loaded(spec).model;
    const double f = m.forward_flops(), b = m.backward_flops();
    char rec[32] = "-", raw[32] = "-", interp[32] = "-";
    if (c.count("recompute-all")) std::snprintf(rec, sizeof rec, "%.2f", c["recompute-all"]);
    if (c.count("raw kernels")) {
      std::snprintf(raw, sizeof raw, "%.2f", c["raw kernels"]);
      std::snprintf(interp, sizeof interp, "%+.1f%%", 100 * (c["interleaved store-all"] / c["raw kernels"] - 1));
    }
    std::printf("%-24s %10.2f %10.2f %10s %8.2f %9.2f %10.2f %10s %8s\n", spec, c["store-all"], c["sqrt"], rec,
                c["sqrt"] / c["store-all"], c["pred sqrt"], 1 + f / (f + b), raw, interp);
  }
  std::printf("ms: best median of one training step on the CPU backend (1 thread). sqrt/SA: measured time ratio;\n"
              "flops 1+o: the simulator's ratio (recomputed FLOPs); 1+F/(F+B): 'one extra forward'.\n"
              "interp: the executor's store-all over the same kernels in a plain loop (interleaved runs, best of each).\n");
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
