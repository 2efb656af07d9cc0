// Executing schedules on the CUDA backend (gpu/backend), the GPU counterpart of
// bench_executor.cpp.
// 1. store-all vs sqrt on mlp:16:4096:256 and mlp:32:1024:512: median time of a
//    training step (CUDA events), tracked peak and device peak; √n checkpointing
//    should cost about one extra forward: (sqrt - store-all) / F near 1, F the
//    measured forward time of store-all (its fwd instructions).
// 2. Interpreter overhead: the executor's store-all against the same kernels
//    launched in a plain loop on preallocated buffers, same stream and cuBLAS
//    handle (width >= 1024, where the GEMMs dominate).
// Without a CUDA device it prints why and exits 0. Prints a summary table
// ("summary:") after Google Benchmark's own.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/exec/executor.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "gpu/backend/cuda_backend.h"
#include "gpu/cuda_backend_factory.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace {

namespace gpu = remat::cuda;

// Owned by main(), which destroys it before returning: CUDA objects must not
// outlive main (the runtime may already be torn down when statics die).
gpu::CudaBackend* g_cuda = nullptr;

struct Loaded {
  remat::Model model;
  remat::HostData data;
};

// The backend holds one model's baseline at a time (1 GiB of weights for the
// 4096-wide MLP): load on change only.
Loaded& loaded(const std::string& spec) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  static std::string current;
  auto& l = cache[spec];
  if (!l) {
    l = std::make_unique<Loaded>();
    l->model = remat::make_preset(spec);
    l->data = remat::make_host_data(l->model, 1);
  }
  if (current != spec) {
    g_cuda->load(l->model, l->data);
    current = spec;
  }
  return *l;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size();
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

struct Row {
  std::vector<double> ms;       // per timed run
  std::vector<double> fwd_ms;   // store-all: its fwd instructions
  uint64_t tracked = 0, device = 0, reserved = 0;
};
std::map<std::string, std::map<std::string, Row>> g_rows;  // model -> column -> figures

remat::ExecOptions one_run() {
  remat::ExecOptions o;
  o.seed = 1;
  o.repeat = 1;
  return o;
}

void execute(benchmark::State& state, const std::string& spec, const std::string& strategy) {
  Loaded& l = loaded(spec);
  const remat::Schedule s = remat::make_strategy(strategy)->schedule(l.model);
  const remat::Simulation sim = remat::simulate(l.model, s);
  Row& row = g_rows[spec][strategy];
  for (auto _ : state) {
    const remat::ExecResult r = remat::execute_loaded(l.model, s, *g_cuda, l.data, one_run());
    if (!r.ok()) {
      state.SkipWithError(r.message.c_str());
      break;
    }
    state.SetIterationTime(r.time_ms / 1000.0);  // the timed run, not the warm-up
    row.ms.push_back(r.time_ms);
    double fwd = 0;
    for (std::size_t i = 0; i < s.code.size(); ++i)
      if (s.code[i].kind == remat::InstrKind::Fwd) fwd += r.instr_ms[i];
    row.fwd_ms.push_back(fwd);
    row.tracked = r.tracked_peak_bytes;
    row.device = r.memory.allocator_peak;
    row.reserved = r.memory.reserved_peak;
  }
  state.counters["tracked_MiB"] = static_cast<double>(row.tracked) / (1 << 20);
  state.counters["allocator_MiB"] = static_cast<double>(row.device) / (1 << 20);
  state.counters["sim_overhead"] = sim.overhead;
}

// A plain cudaMalloc buffer for the raw loop (the backend's buffers come from its pool).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(uint64_t bytes) : bytes_(bytes) {
    if (bytes) CUDA_CHECK_THROW(cudaMalloc(&p_, bytes));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  uint64_t bytes_ = 0;
};

// store-all of an mlp preset (Linear, ReLU, ..., MSELoss) with the kernels
// launched directly: one buffer per activation and gradient, allocated once,
// parameters and target shared with the backend's upload (copied here).
struct RawLoop {
  explicit RawLoop(Loaded& l);
  double step_ms();
  Loaded& l;
  std::vector<DeviceBuffer> A, G, P, dP;
  DeviceBuffer target, loss, scratch;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~RawLoop() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

RawLoop::RawLoop(Loaded& loaded_model) : l(loaded_model) {
  const remat::Model& m = l.model;
  const int n = m.size();
  cudaStream_t st = g_cuda->stream();
  for (int v = 0; v < n; ++v) {
    A.emplace_back(m.op(v).bytes);
    G.emplace_back(m.op(v).bytes);
  }
  CUDA_CHECK_THROW(cudaMemcpyAsync(A[0].get(), l.data.input.data(), 4 * l.data.input.size(), cudaMemcpyHostToDevice, st));
  for (const auto& p : l.data.params) {
    P.emplace_back(4 * p.size());
    dP.emplace_back(4 * p.size());
    CUDA_CHECK_THROW(cudaMemcpyAsync(P.back().get(), p.data(), 4 * p.size(), cudaMemcpyHostToDevice, st));
  }
  target = DeviceBuffer(4 * l.data.target.size());
  CUDA_CHECK_THROW(cudaMemcpyAsync(target.get(), l.data.target.data(), 4 * l.data.target.size(), cudaMemcpyHostToDevice, st));
  loss = DeviceBuffer(4);
  scratch = DeviceBuffer(m.op(0).bytes);
  CUDA_CHECK_THROW(cudaEventCreate(&start));
  CUDA_CHECK_THROW(cudaEventCreate(&stop));
  CUDA_CHECK_THROW(cudaStreamSynchronize(st));
}

double RawLoop::step_ms() {
  const remat::Model& m = l.model;
  const int n = m.size();
  cudaStream_t st = g_cuda->stream();
  cublasHandle_t h = g_cuda->cublas();
  for (auto& d : dP) CUDA_CHECK_THROW(cudaMemsetAsync(d.get(), 0, d.bytes(), st));  // before the timing, as the executor
  CUDA_CHECK_THROW(cudaEventRecord(start, st));
  std::size_t p = 0;
  for (int v = 1; v < n; ++v) {  // forward: Linear, ReLU, ..., MSE
    const remat::Op& op = m.op(v);
    const float* x = A[static_cast<std::size_t>(op.inputs[0])].f32();
    float* y = A[static_cast<std::size_t>(v)].f32();
    const remat::Op& in = m.op(op.inputs[0]);
    if (op.kind == remat::OpKind::Linear) {
      gpu::linear_fwd(x, P[p].f32(), P[p + 1].f32(), y, in.rows(), in.cols(), op.cols(), h, st);
      p += 2;
    } else if (op.kind == remat::OpKind::ReLU) {
      gpu::act_fwd(gpu::Act::ReLU, x, y, op.numel(), st);
    } else {
      gpu::mse_fwd(x, target.f32(), loss.f32(), in.numel(), st);
    }
  }
  for (int v = n - 1; v >= 1; --v) {  // backward
    const remat::Op& op = m.op(v);
    const int u = op.inputs[0];
    const remat::Op& in = m.op(u);
    float* dx = u == 0 ? scratch.f32() : G[static_cast<std::size_t>(u)].f32();
    if (op.kind == remat::OpKind::MSELoss) {
      gpu::mse_bwd(A[static_cast<std::size_t>(u)].f32(), target.f32(), dx, in.numel(), false, st);
    } else if (op.kind == remat::OpKind::ReLU) {
      gpu::act_bwd(gpu::Act::ReLU, A[static_cast<std::size_t>(v)].f32(), G[static_cast<std::size_t>(v)].f32(), dx,
                   op.numel(), false, st);
    } else {
      p -= 2;
      gpu::linear_bwd(A[static_cast<std::size_t>(u)].f32(), P[p].f32(), G[static_cast<std::size_t>(v)].f32(), dx,
                      dP[p].f32(), dP[p + 1].f32(), in.rows(), in.cols(), op.cols(), false, h, st);
    }
  }
  CUDA_CHECK_THROW(cudaEventRecord(stop, st));
  CUDA_CHECK_THROW(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK_THROW(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

// Alternates the raw loop and the executor's store-all (interleaved, so that
// clock and thermal drift hit both alike).
void raw_mlp(benchmark::State& state, const std::string& spec) {
  Loaded& l = loaded(spec);
  RawLoop raw(l);
  const remat::Schedule s = remat::make_strategy("store-all")->schedule(l.model);
  Row& raw_row = g_rows[spec]["raw kernels"];
  Row& exec_row = g_rows[spec]["interleaved store-all"];
  for (auto _ : state) {
    const double ms = raw.step_ms();
    state.SetIterationTime(ms / 1000.0);
    raw_row.ms.push_back(ms);
    const remat::ExecResult r = remat::execute_loaded(l.model, s, *g_cuda, l.data, one_run());
    if (!r.ok()) {
      state.SkipWithError(r.message.c_str());
      break;
    }
    exec_row.ms.push_back(r.time_ms);
  }
  state.counters["executor_ms"] = median(exec_row.ms);
  state.counters["interp_overhead"] = median(exec_row.ms) / median(raw_row.ms) - 1;
}

const char* kModels[] = {"mlp:16:4096:256", "mlp:32:1024:512"};

void register_all() {
  for (const char* spec : kModels) {
    for (const char* strategy : {"store-all", "sqrt"}) {
      benchmark::RegisterBenchmark((std::string("cuda_execute/") + spec + "/" + strategy).c_str(),
                                   [spec, strategy](benchmark::State& s) { execute(s, spec, strategy); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(10);
    }
    benchmark::RegisterBenchmark((std::string("cuda_raw_kernels/") + spec).c_str(),
                                 [spec](benchmark::State& s) { raw_mlp(s, spec); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(10);
  }
}

double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

void print_summary() {
  std::printf("\nsummary: %s, medians over all timed runs\n", g_cuda->name().c_str());
  std::printf("%-18s %-10s %9s %9s %11s %11s %11s %10s\n", "model", "strategy", "ms", "fwd ms", "tracked MiB",
              "alloc MiB", "reserv MiB", "vs SA");
  for (const char* spec : kModels) {
    auto& c = g_rows[spec];
    for (const char* strategy : {"store-all", "sqrt"}) {
      if (!c.count(strategy) || c[strategy].ms.empty()) continue;
      const Row& r = c[strategy];
      const double sa = c.count("store-all") ? median(c["store-all"].ms) : 0;
      std::printf("%-18s %-10s %9.3f %9.3f %11.1f %11.1f %11.1f %9.3fx\n", spec, strategy, median(r.ms),
                  median(r.fwd_ms), mib(r.tracked), mib(r.device), mib(r.reserved), sa > 0 ? median(r.ms) / sa : 0.0);
    }
  }
  std::printf("\n%-18s %12s %12s %14s %11s %11s\n", "model", "sqrt-SA ms", "1 fwd ms", "(sqrt-SA)/fwd", "raw ms",
              "interp");
  for (const char* spec : kModels) {
    auto& c = g_rows[spec];
    if (c["store-all"].ms.empty() || c["sqrt"].ms.empty()) continue;
    const double sa = median(c["store-all"].ms), sq = median(c["sqrt"].ms), f = median(c["store-all"].fwd_ms);
    char raw[32] = "-", interp[32] = "-";
    if (!c["raw kernels"].ms.empty() && !c["interleaved store-all"].ms.empty()) {
      const double rk = median(c["raw kernels"].ms), ex = median(c["interleaved store-all"].ms);
      std::snprintf(raw, sizeof raw, "%.3f", rk);
      std::snprintf(interp, sizeof interp, "%+.1f%%", 100 * (ex / rk - 1));
    }
    std::printf("%-18s %12.3f %12.3f %14.2f %11s %11s\n", spec, sq - sa, f, f > 0 ? (sq - sa) / f : 0.0, raw, interp);
  }
  std::printf("ms: one training step on the GPU (CUDA events, marks 0..n). fwd ms: its fwd instructions (sqrt: with\n"
              "the recomputations; '1 fwd ms' below is store-all's, one forward pass).\n"
              "(sqrt-SA)/fwd near 1: sqrt costs about one extra forward. alloc MiB: the pool's used high-water mark\n"
              "(baseline + tensors + scratch + cuBLAS workspace + rounding, all from the one pool); reserv MiB: its\n"
              "reserved high-water mark. interp: the executor's store-all over the same kernels in a plain loop.\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::string why;
  std::unique_ptr<remat::Backend> owner = gpu::make_cuda_backend(&why);
  if (!owner) {
    std::printf("bench_cuda_executor: skipped, no CUDA device: %s\n", why.c_str());
    return 0;
  }
  g_cuda = dynamic_cast<gpu::CudaBackend*>(owner.get());
  try {
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    print_summary();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_executor: %s\n", e.what());
    return 1;
  }
  return 0;
}
