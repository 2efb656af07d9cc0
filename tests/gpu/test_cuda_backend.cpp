// The CUDA backend under the executor: for each preset and strategy the tracked
// peak equals the simulator's prediction to the byte, loss and gradients are
// bit-identical to store-all on CUDA, and CUDA agrees with the CPU reference
// within float32 tolerance; out-of-memory is a result, and the device figures
// cover what was tracked. Without a usable device every test but the factory's
// skips with the reason make_cuda_backend gave.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend/cuda_backend.h"
#include "gpu/cuda_backend_factory.h"
#include "tests/exec/exec_test_util.h"
#include "tests/gpu/fault_kernel.h"
#include "tests/gpu/require_cuda.h"
#include "tests/support/scoped_env.h"
#include "core/exec/forwarding_backend.h"
#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"
#include "core/exec/same_result.h"
#include "core/io/model_source.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// One backend for the whole program (creating a context per test is slow);
// nullptr with the reason when there is no device. The environment destroys
// it before main returns: CUDA objects must not outlive the runtime.
struct Device {
  std::unique_ptr<Backend> backend;
  std::string why_not;
  bool made = false;
};

Device& device() {
  static Device d;
  if (!d.made) {
    d.made = true;
    d.backend = cuda::make_cuda_backend(&d.why_not);
  }
  return d;
}

class DeviceEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { device().backend.reset(); }
};
[[maybe_unused]] auto* const g_environment = ::testing::AddGlobalTestEnvironment(new DeviceEnvironment);

#define REQUIRE_CUDA() REMAT_SKIP_WITHOUT_CUDA(device().backend ? std::string() : device().why_not)

TEST(CudaBackendFactory, GivesABackendOrAReason) {
  std::string why;
  auto b = cuda::make_cuda_backend(&why);
  if (b) {
    EXPECT_EQ(b->name().rfind("cuda: ", 0), 0u) << b->name();
  } else {
    EXPECT_FALSE(why.empty());
    std::cout << "make_cuda_backend: " << why << "\n";
  }
  // Asking again gives the same answer (no error state left behind).
  std::string again;
  auto c = cuda::make_cuda_backend(&again);
  EXPECT_EQ(b == nullptr, c == nullptr);
  EXPECT_EQ(why, again);
}

TEST(CudaBackendFactory, NullReasonPointerIsAllowed) {
  auto b = cuda::make_cuda_backend(nullptr);
  EXPECT_EQ(b != nullptr, device().backend != nullptr);
}

bool close(float a, float b) { return std::fabs(a - b) <= 1e-3f * (1.0f + std::fabs(b)); }

class CudaStrategies : public ::testing::TestWithParam<std::string> {};
const std::string kModels = REMAT_EXEC_TEST_MODELS;
// "chain_12_256" (and "gpt_2_32_4_16_2_bf16_cuda_64") for a preset, the
// file's stem for a model file.
std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  if (const auto slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1, s.rfind('.') - slash - 1);
  for (char& c : s)
    if (c == ':' || c == '@') c = '_';
  return s;
}

// Each of `specs` on `gpu` gives `base`'s loss and gradients bit for bit,
// with the simulator's tracked peak.
void expect_bitwise_to(const ExecResult& base, const Model& m, Backend& gpu,
                       std::initializer_list<const char*> specs) {
  for (const char* spec : specs) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const ExecResult r = execute(m, s, gpu, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, s).peak_bytes);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0) << r.loss << " vs " << base.loss;
    EXPECT_EQ(r.param_grads, base.param_grads);
    EXPECT_EQ(r.grad_hash, base.grad_hash);
  }
}

TEST_P(CudaStrategies, PeakExactBitwiseToStoreAllAndCloseToCpu) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = load_model(GetParam());
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(ref.ok()) << ref.message;
  const ExecResult base = execute(m, schedule_of(m, "store-all"), gpu, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  EXPECT_EQ(base.backend, gpu.name());
  EXPECT_EQ(base.baseline_bytes, ref.baseline_bytes);

  // CUDA vs the CPU reference.
  EXPECT_LE(std::fabs(base.loss - ref.loss), 1e-4f * std::fabs(ref.loss)) << base.loss << " vs " << ref.loss;
  ASSERT_EQ(base.param_grads.size(), ref.param_grads.size());
  for (std::size_t k = 0; k < ref.param_grads.size(); ++k) {
    ASSERT_EQ(base.param_grads[k].size(), ref.param_grads[k].size());
    int bad = 0;
    for (std::size_t i = 0; i < ref.param_grads[k].size(); ++i) {
      if (!close(base.param_grads[k][i], ref.param_grads[k][i]) && ++bad <= 3)
        ADD_FAILURE() << "parameter tensor " << k << "[" << i << "]: cuda " << base.param_grads[k][i] << ", cpu "
                      << ref.param_grads[k][i];
    }
    EXPECT_EQ(bad, 0) << "parameter tensor " << k;
  }

  for (const char* spec : {"store-all", "recompute-all", "sqrt", "every-k:3"}) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const Simulation sim = simulate(m, s);
    const ExecResult r = execute(m, s, gpu, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
    // The pool's figures: everything came from it, rounding only adds.
    const MemoryStats& mem = r.memory;
    EXPECT_EQ(mem.baseline, r.baseline_bytes);
    EXPECT_EQ(mem.tensors, r.tracked_peak_bytes);
    const auto& cuda_backend = dynamic_cast<cuda::CudaBackend&>(gpu);
    EXPECT_EQ(mem.workspace, cuda_backend.cublas_workspace_bytes() + cuda_backend.conv_workspace_bytes());
    EXPECT_GE(mem.allocator_peak, mem.baseline + mem.tensors + mem.scratch + mem.workspace);
    EXPECT_GE(mem.reserved_peak, mem.allocator_peak);
    EXPECT_GT(mem.device_used, mem.reserved_peak);  // the context and the code are on the device too
    EXPECT_EQ(gpu.memory().live_bytes(), 0u);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0) << r.loss << " vs " << base.loss;
    ASSERT_EQ(r.param_grads.size(), base.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k) {
      ASSERT_EQ(r.param_grads[k].size(), base.param_grads[k].size());
      EXPECT_EQ(std::memcmp(r.param_grads[k].data(), base.param_grads[k].data(), 4 * r.param_grads[k].size()), 0)
          << "parameter tensor " << k;
    }
    EXPECT_EQ(r.grad_hash, base.grad_hash);
    EXPECT_EQ(r.instr_ms.size(), s.code.size());
    EXPECT_GT(r.time_ms, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaStrategies,
                         ::testing::Values("chain:12:256", "mlp:4:64:8", "transformer:2:32:8:2",
                                           "resnet:10:4:64:4:5",
                                           // Embedding, learned positions, bmm on aux copies, mask, views' backward
                                           "gpt:2:32:4:16:2:f32:64",
                                           // torch.matmul's broadcast batches: stride-0 runs, summed gradients
                                           kModels + "/broadcast_matmul.json",
                                           // every view kind's backward, Expand's sum included
                                           kModels + "/views_small.json",
                                           // fused attention: strided q, k, v, out in q's order, q = k = v
                                           kModels + "/attention_small.json",
                                           // the pointwise family and reductions: strided, broadcast, learned
                                           kModels + "/pointwise_small.json",
                                           // a Concat's learned piece (a class token): broadcast, summed back
                                           kModels + "/class_token.json",
                                           // kernels that read rows fed strided views: dense copies
                                           kModels + "/strided_kernels.json",
                                           // a masked attention, norms without affine parameters, TopK and Gather
                                           kModels + "/tail_small.json",
                                           // Add through strides (MaxViT's departition), losses of strided views
                                           kModels + "/strided_readers.json", kModels + "/strided_ce.json",
                                           kModels + "/bce_small.json",
                                           // every Pad mode, a roll as Slices and a Concat
                                           kModels + "/pad_small.json",
                                           // an RMSNorm of the input: no backward for its statistics
                                           kModels + "/rmsnorm_of_input.json",
                                           // label smoothing, keeping the logits or the log-probabilities
                                           kModels + "/ce_smoothed.json", kModels + "/ce_smoothed_logp.json"),
                         case_name);

TEST(CudaBackend, MemoryLimitGivesOutOfMemoryResult) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("mlp:4:64:8");
  const Schedule s = schedule_of(m, "store-all");
  ExecOptions o = quick();
  o.memory_limit = simulate(m, s).peak_bytes - 1;
  const ExecResult r = execute(m, s, gpu, o);
  EXPECT_EQ(r.status, ExecStatus::OutOfMemory) << r.message;
  EXPECT_GE(r.oom_instruction, 0);
  EXPECT_NE(r.message.find("out of memory"), std::string::npos) << r.message;
  EXPECT_EQ(gpu.memory().live_bytes(), 0u);
  // The backend is still usable.
  o.memory_limit = 0;
  EXPECT_TRUE(execute(m, s, gpu, o).ok());
}

TEST(CudaBackend, DeviceAllocationFailureIsNullAndLeavesNoError) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("mlp:2:16:4");
  gpu.compute().load(m, make_host_data(m, 3));
  const uint64_t before = gpu.memory().live_bytes();
  EXPECT_EQ(gpu.memory().allocate(uint64_t{1} << 50), nullptr);  // 1 PiB
  EXPECT_EQ(gpu.memory().live_bytes(), before);
  EXPECT_LT(gpu.memory().device_free_bytes(), uint64_t{1} << 50);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(execute(m, schedule_of(m, "sqrt"), gpu, quick()).ok());
}

TEST(CudaBackend, TrackedBytesAreExact) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("mlp:2:16:4");
  gpu.compute().load(m, make_host_data(m, 3));
  gpu.memory().reset_peaks();
  void* a = gpu.memory().allocate(3);
  void* b = gpu.memory().allocate(1001);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(gpu.memory().live_bytes(), 1004u);
  gpu.memory().release(a);
  EXPECT_EQ(gpu.memory().live_bytes(), 1001u);
  EXPECT_EQ(gpu.memory().peak_bytes(), 1004u);
  EXPECT_GE(gpu.memory().memory_stats().allocator_peak, 1004u + gpu.compute().baseline_bytes());
  gpu.memory().release(b);
  gpu.memory().reset_peaks();
  EXPECT_EQ(gpu.memory().live_bytes(), 0u);
  EXPECT_EQ(gpu.memory().peak_bytes(), 0u);
  gpu.timing().synchronize();
}

// Two runs of one schedule give the same bits (one handle, one stream).
TEST(CudaBackend, RepeatedRunsAreBitIdentical) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("transformer:2:32:8:2");
  const ExecResult a = execute(m, schedule_of(m, "sqrt"), gpu, quick(11));
  const ExecResult b = execute(m, schedule_of(m, "sqrt"), gpu, quick(11));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.grad_hash, b.grad_hash);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0);
}

// REMAT_CUDA_GATE=1 (gated_timer.h): each instruction's kernels are held
// until the host has issued them all, so its time is device time alone and
// the step's time their sum; the bits, the tracked peak and the instruction
// count are the ungated run's, no gate waits out its limit, and a value
// other than 0 or 1 is refused naming the variable.
TEST(CudaBackend, GatedMarksTimeEachInstructionAloneAndChangeNoBit) {
  REQUIRE_CUDA();
  const Model m = make_preset("gpt:2:64:4:16:2:bf16");
  const Schedule s = schedule_of(m, "sqrt");
  const ExecResult plain = execute(m, s, *device().backend, quick(5));
  ASSERT_TRUE(plain.ok()) << plain.message;
  testing::ScopedEnv gate("REMAT_CUDA_GATE");
  gate.set("yes");
  std::string why;
  EXPECT_EQ(cuda::make_cuda_backend(&why), nullptr);
  EXPECT_NE(why.find("REMAT_CUDA_GATE: 'yes' is not 0 or 1"), std::string::npos) << why;
  gate.set("1");
  const std::unique_ptr<Backend> gated = cuda::make_cuda_backend(&why);
  ASSERT_TRUE(gated) << why;
  EXPECT_NE(gated->name().find("REMAT_CUDA_GATE"), std::string::npos) << gated->name();
  const ExecResult g = execute(m, s, *gated, quick(5));
  ASSERT_TRUE(g.ok()) << g.message;
  EXPECT_EQ(g.grad_hash, plain.grad_hash);
  EXPECT_EQ(std::memcmp(&g.loss, &plain.loss, sizeof(float)), 0);
  EXPECT_EQ(g.tracked_peak_bytes, plain.tracked_peak_bytes);
  ASSERT_EQ(g.instr_ms.size(), s.code.size());
  double sum = 0;
  int timed = 0;
  for (double ms : g.instr_ms) {
    EXPECT_GE(ms, 0.0);
    EXPECT_LT(ms, 1000.0);  // far below the gate's 2 s limit: none let go on it
    sum += ms;
    timed += ms > 0;
  }
  EXPECT_GT(timed, 0);
  EXPECT_NEAR(sum, g.time_ms, 0.05 * g.time_ms + 1e-3);
  auto* cb = dynamic_cast<cuda::CudaBackend*>(gated.get());
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(cb->gate_timeouts(), 0);
}

// Each strategy starts from a trimmed pool: what recompute-all reserves is the
// same whether store-all ran before it or not, and less than store-all's.
TEST(CudaBackend, NoStrategyInheritsAnothersReservation) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("mlp:8:4096:1024");  // 16 MiB tensors: far above the pool's granularity
  const Schedule rec = schedule_of(m, "recompute-all"), store = schedule_of(m, "store-all");
  const auto runs = execute_strategies(m, {rec, store, rec}, gpu, quick());
  for (const auto& r : runs) ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(runs[2].memory.reserved_peak, runs[0].memory.reserved_peak);
  EXPECT_EQ(runs[2].memory.allocator_peak, runs[0].memory.allocator_peak);
  EXPECT_LT(runs[0].memory.reserved_peak, runs[1].memory.reserved_peak);
  // The allocator sees (at least) the bytes the prediction says recompute-all saves.
  const uint64_t saved = simulate(m, store).peak_bytes - simulate(m, rec).peak_bytes;
  EXPECT_GE(runs[1].memory.allocator_peak - runs[0].memory.allocator_peak, saved);
}

// A baseline larger than the device: out of memory for every strategy, found
// before any host data is generated (2 x 2^34 floats of weights).
TEST(CudaBackend, BaselineLargerThanTheDeviceIsOutOfMemory) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("mlp:2:131072:1");
  ASSERT_GT(baseline_bytes_of(m), gpu.memory().device_free_bytes());
  const auto runs = execute_strategies(m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt")}, gpu, quick());
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, ExecStatus::OutOfMemory);
    EXPECT_EQ(r.oom_needed, baseline_bytes_of(m));
    EXPECT_NE(r.message.find("free on the device"), std::string::npos) << r.message;
  }
  EXPECT_TRUE(gpu.timing().healthy());
}

// A kernel that writes to an illegal address at one op: that strategy fails
// with a device fault, the backend resets the device and the next strategies
// run, bit-identical to each other.
class IllegalWriteAt final : public WrappedBackend, public ForwardingCompute {
 public:
  IllegalWriteAt(cuda::CudaBackend& inner, int op)
      : WrappedBackend(inner), ForwardingCompute(inner.compute()), cuda_(inner), op_(op) {}
  Compute& compute() override { return *this; }
  void forward(const Model& m, int op, const TensorTable& t) override {
    ForwardingCompute::forward(m, op, t);
    if (op == op_ && !done_) {
      done_ = true;
      testing::launch_illegal_write(cuda_.stream());
    }
  }

 private:
  cuda::CudaBackend& cuda_;
  int op_;
  bool done_ = false;
};

// The fault fails its own strategy only. The backend then resets the device:
// when the driver gives it a new context the next strategies run (and agree bit
// for bit); when it does not, they are not-run with the driver's reason. Never
// a wrong result, never another strategy's error.
TEST(CudaBackend, AKernelFaultIsAResultAndTheDeviceRecoversOrSaysWhy) {
  REQUIRE_CUDA();
  auto& gpu = dynamic_cast<cuda::CudaBackend&>(*device().backend);
  const Model m = make_preset("mlp:3:64:8");
  for (const bool sync_each : {false, true}) {
    SCOPED_TRACE(sync_each ? "sync each" : "asynchronous");
    IllegalWriteAt faulty(gpu, 2);
    ExecOptions o = quick();
    o.sync_each = sync_each;
    const auto runs = execute_strategies(
        m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt"), schedule_of(m, "recompute-all")}, faulty, o);
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0].status, ExecStatus::Failed);
    EXPECT_NE(runs[0].message.find("device fault"), std::string::npos) << runs[0].message;
    if (sync_each) {
      EXPECT_NE(runs[0].message.find("device fault at instruction"), std::string::npos) << runs[0].message;
    }
    if (gpu.healthy()) {
      ASSERT_TRUE(runs[1].ok()) << runs[1].message;
      ASSERT_TRUE(runs[2].ok()) << runs[2].message;
      EXPECT_EQ(runs[1].grad_hash, runs[2].grad_hash);
      std::cout << "recovered after the fault\n";
    } else {
      for (std::size_t i = 1; i < 3; ++i) {
        EXPECT_EQ(runs[i].status, ExecStatus::NotRun);
        EXPECT_NE(runs[i].message.find("unusable after the fault in strategy 'store-all' ("), std::string::npos)
            << runs[i].message;
      }
      std::cout << "not recovered: " << runs[1].message << "\n";
      return;  // nothing more can run in this process
    }
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The host tier on CUDA (pinned buffers, a copy stream ordered by events):
// both tracked peaks equal the simulator's, the pinned pool holds exactly the
// offloaded bytes at its peak, and the gradients are store-all's bit for bit
// (a copy changes nothing). Not run in this repository's CI (no GPU).
TEST(CudaBackend, OffloadTiersAndBitwiseGradients) {
  REQUIRE_CUDA();
  Backend& b = *device().backend;
  for (const char* spec : {"chain:10:4096", "mlp:4:64:8", "transformer:2:32:8:2"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    const ExecResult base = execute(m, schedule_of(m, "store-all"), b, quick());
    ASSERT_TRUE(base.ok()) << base.message;
    for (const char* st : {"offload", "offload:2", "offload+auto"}) {
      SCOPED_TRACE(st);
      const Schedule s = schedule_of(m, st);
      const Simulation sim = simulate(m, s);
      const ExecResult r = execute(m, s, b, quick());
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
      EXPECT_EQ(r.host_tracked_peak_bytes, sim.peak_host_bytes);
      EXPECT_EQ(r.host_memory.allocator_peak, sim.peak_host_bytes);
      EXPECT_EQ(r.loss, base.loss);
      EXPECT_EQ(r.param_grads, base.param_grads);
    }
  }
}

// Mixed precision on CUDA (gpu/backend/cuda_mixed.h): bf16/f16 presets, in
// every op's dtype and under autocast's CUDA policy, run under every strategy
// with the simulator's tracked peak and store-all's loss and gradients on the
// device bit for bit; f16 with GradScaler's scale. Against the CPU reference
// only roughly: the device's f32 sums run in another order, and a value near
// a rounding boundary then lands on the neighbouring bf16/f16 value, so the
// loss is held to 16 units of the dtype's roundoff (the CPU tests' bound
// against f32) and the gradients to a relative error of 64 units.
class CudaMixed : public ::testing::TestWithParam<std::string> {};
// The unit roundoff of the model's 16-bit dtype: bf16's where any op is bf16
// (a captured pure-bf16 model casts its logits to f32 before the loss), else f16's.
double low_unit_roundoff(const Model& m) {
  const bool bf16 = std::any_of(m.ops().begin(), m.ops().end(), [](const Op& op) { return op.dtype == DType::BF16; });
  return bf16 ? 0x1p-8 : 0x1p-11;
}

TEST_P(CudaMixed, PeakExactBitwiseToStoreAllAndNearTheCpu) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = load_model(GetParam());
  const double u = low_unit_roundoff(m);
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(ref.ok()) << ref.message;
  const ExecResult base = execute(m, schedule_of(m, "store-all"), gpu, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  EXPECT_EQ(base.loss_scale, ref.loss_scale);
  EXPECT_LE(std::fabs(base.loss - ref.loss), 16 * u * std::fabs(ref.loss)) << base.loss << " vs " << ref.loss;
  EXPECT_LT(relative_error(base, ref).grad, 64 * u);
  expect_bitwise_to(base, m, gpu, {"recompute-all", "sqrt", "every-k:3"});
}

// The two GEMM paths of mixed precision (core/exec/gemm_path.h): tensor
// cores (the default) run the Linears' products on 16-bit operands, a kernel
// call per Linear per pass at least, and REMAT_CUDA_GEMM=f32's path none; both
// give every strategy store-all's bits, and they agree with each other as
// each does with the CPU (within twice its bound on the loss). The test above
// runs whichever path the environment chose; this one sets each in turn.
TEST_P(CudaMixed, BothGemmPathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  auto* cb = dynamic_cast<cuda::CudaBackend*>(device().backend.get());
  ASSERT_NE(cb, nullptr);
  const GemmMode was = cb->gemm_mode();
  const Model m = load_model(GetParam());
  const double u = low_unit_roundoff(m);
  int lowp_ops = 0;
  for (int v = 0; v < m.size(); ++v) lowp_ops += lowp_gemm(m, v, false, GemmMode::TensorCore);
  std::vector<ExecResult> base;
  for (const GemmMode mode : {GemmMode::TensorCore, GemmMode::F32}) {
    SCOPED_TRACE(std::string(gemm_mode_name(mode)));
    cb->set_gemm_mode(mode);
    const uint64_t calls = cb->lowp_gemm_calls();
    base.push_back(execute(m, schedule_of(m, "store-all"), *cb, quick()));
    ASSERT_TRUE(base.back().ok()) << base.back().message;
    const uint64_t taken = cb->lowp_gemm_calls() - calls;
    if (mode == GemmMode::TensorCore) EXPECT_GE(taken, 2u * static_cast<uint64_t>(lowp_ops));
    else EXPECT_EQ(taken, 0u);
    expect_bitwise_to(base.back(), m, *cb, {"recompute-all", "sqrt"});
  }
  cb->set_gemm_mode(was);
  EXPECT_LE(std::fabs(base[0].loss - base[1].loss), 32 * u * std::fabs(base[1].loss))
      << base[0].loss << " vs " << base[1].loss;
  EXPECT_LT(relative_error(base[0], base[1]).grad, 128 * u);
  std::cout << GetParam() << ": " << lowp_ops << " ops on tensor cores; loss " << base[0].loss << " (tensor) vs "
            << base[1].loss << " (f32), gradients " << (base[0].param_grads == base[1].param_grads ? "the same" : "differ")
            << "\n";
}

// The two pointwise paths of mixed precision (core/exec/pointwise_path.h):
// the 16-bit kernels (the default) load and store the tensors of a GPT's
// scale, mask, softmax, dropouts, GELU and residual adds, a ResNet's ReLUs
// and adds, as stored; REMAT_CUDA_POINTWISE=f32 widens them as before. The
// kernels compute what the f32 ones do and round once where the widening
// call rounds, so the two paths give the same loss and gradients bit for
// bit, under every strategy and either GEMM path, with the same tracked peak
// (the simulator's); the 16-bit path takes no scratch it would leave
// unwritten, so its allocator peak is at most the widening path's.
void expect_both_pointwise_paths_bitwise(const std::string& spec, const Model& m) {
  auto* cb = dynamic_cast<cuda::CudaBackend*>(device().backend.get());
  ASSERT_NE(cb, nullptr);
  const GemmMode gemm_was = cb->gemm_mode();
  const PointwiseMode was = cb->pointwise_mode();
  int io_ops = 0;
  for (int v = 0; v < m.size(); ++v) io_ops += lowp_io(m, v, false, PointwiseMode::Direct);
  ASSERT_GT(io_ops, 0);
  for (const GemmMode gemm : {GemmMode::TensorCore, GemmMode::F32}) {
    SCOPED_TRACE(std::string(gemm_mode_name(gemm)));
    cb->set_gemm_mode(gemm);
    std::vector<ExecResult> base;
    for (const PointwiseMode mode : {PointwiseMode::F32, PointwiseMode::Direct}) {
      SCOPED_TRACE(std::string(pointwise_mode_name(mode)));
      cb->set_pointwise_mode(mode);
      const uint64_t calls = cb->lowp_io_calls();
      base.push_back(execute(m, schedule_of(m, "store-all"), *cb, quick()));
      ASSERT_TRUE(base.back().ok()) << base.back().message;
      const uint64_t taken = cb->lowp_io_calls() - calls;
      if (mode == PointwiseMode::Direct) EXPECT_GE(taken, static_cast<uint64_t>(io_ops));
      else EXPECT_EQ(taken, 0u);
      // The 16-bit path's store-all against the widening one's: the same bits,
      // the same tracked bytes, no more scratch (none it would leave unwritten).
      EXPECT_EQ(std::memcmp(&base.back().loss, &base.front().loss, sizeof(float)), 0)
          << base.back().loss << " vs " << base.front().loss;
      EXPECT_EQ(base.back().param_grads, base.front().param_grads);
      EXPECT_EQ(base.back().tracked_peak_bytes, base.front().tracked_peak_bytes);
      EXPECT_LE(base.back().memory.allocator_peak, base.front().memory.allocator_peak);
      expect_bitwise_to(base.back(), m, *cb, {"recompute-all", "sqrt"});
    }
  }
  cb->set_gemm_mode(gemm_was);
  cb->set_pointwise_mode(was);
  std::cout << spec << ": " << io_ops << " ops on 16-bit loads and stores, the widening path's bits\n";
}

TEST_P(CudaMixed, BothPointwisePathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  expect_both_pointwise_paths_bitwise(GetParam(), load_model(GetParam()));
}

// A captured Llama-style decoder: its pointwise family on stored tensors
// (autocast's casts, SwiGLU's product, the rotary embedding's strided halves);
// and pointwise_small.json in bf16 (operands broadcast both ways, strided).
TEST(CudaMixedCaptured, LlamasPointwiseFamilyBothPathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  const std::string llama = REMAT_EXEC_TEST_MODELS "/llama_bf16_small.json";
  expect_both_pointwise_paths_bitwise(llama, load_model(llama));
}
TEST(CudaMixedCaptured, BroadcastAndStridedPointwiseBothPathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  const std::string path = REMAT_EXEC_TEST_MODELS "/pointwise_small.json";
  expect_both_pointwise_paths_bitwise(path + " in bf16", testing::model_in_bf16(path));
}

// The fused attention (scaled_dot_product_attention) on stored tensors, in
// bf16 and f16: attention_small's causal one (q, k, v strided views of one
// projection, the output written as (batch, t, heads, d)), tail_small's (an
// additive mask), attention_adds' (strided k and v; G(q) and G(v) stored
// first by other readers, the attention's gradients added).
TEST(CudaMixedCaptured, FusedAttentionBothPathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  for (const char* dtype : {"bf16", "f16"})
    for (const char* file : {"attention_small", "tail_small", "attention_adds"}) {
      const std::string path = std::string(REMAT_EXEC_TEST_MODELS "/") + file + ".json";
      SCOPED_TRACE(path + " in " + dtype);
      const Model m = testing::model_in(path, dtype);
      int attentions = 0;
      for (int v = 0; v < m.size(); ++v)
        attentions += m.op(v).kind == OpKind::Attention && lowp_io(m, v, false, PointwiseMode::Direct);
      ASSERT_EQ(attentions, 1);
      expect_both_pointwise_paths_bitwise(path + " in " + dtype, m);
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaMixed,
                         ::testing::Values("gpt:2:32:4:16:2:bf16:64", "gpt:2:32:4:16:2:bf16@cuda:64",
                                           "gpt:1:32:4:16:2:f16@cuda:64", "resnet:10:8:32:2:5:bf16@cuda",
                                           "resnet:10:4:64:4:5:f16",
                                           // pure bf16 captured on the CPU: the norms' statistics in bf16 (aux)
                                           kModels + "/pure_bf16_layernorm.json", kModels + "/pure_bf16_norms_cnn.json"),
                         case_name);

// The two convolution paths of mixed precision (core/exec/gemm_path.h's
// lowp_conv, REMAT_CUDA_CONV): cuDNN on 16-bit tensors (the default) runs
// each Conv's forward and backward on the 16-bit operands, at least a call
// per Conv per pass, and the f32 path none; both give every strategy
// store-all's bits with the simulator's tracked peak, the pool's workspace is
// cuBLAS's plus the convolutions' (sized at load for the path's algorithms),
// and the two paths agree as each does with the CPU (the bounds of
// PeakExactBitwiseToStoreAllAndNearTheCpu, doubled). The GEMM path is the
// environment's throughout.
class CudaMixedConv : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaMixedConv, BothConvPathsBitwiseAcrossStrategies) {
  REQUIRE_CUDA();
  auto* cb = dynamic_cast<cuda::CudaBackend*>(device().backend.get());
  ASSERT_NE(cb, nullptr);
  const GemmMode was = cb->conv_mode();
  cb->set_conv_mode(GemmMode::TensorCore);
  if (cb->conv_mode() != GemmMode::TensorCore) {
    cb->set_conv_mode(was);
    GTEST_SKIP() << "cuDNN does not run here: the convolutions run in f32 either way";
  }
  const Model m = load_model(GetParam());
  const DType low = m.op(m.size() - 2).dtype;
  const double u = low == DType::BF16 ? 0x1p-8 : 0x1p-11;
  int convs = 0;
  for (int v = 0; v < m.size(); ++v) convs += lowp_conv(m, v, false, GemmMode::TensorCore);
  ASSERT_GT(convs, 0);
  std::vector<ExecResult> base;
  for (const GemmMode mode : {GemmMode::TensorCore, GemmMode::F32}) {
    SCOPED_TRACE(std::string(gemm_mode_name(mode)));
    cb->set_conv_mode(mode);
    ASSERT_EQ(cb->conv_mode(), mode);
    const uint64_t calls = cb->lowp_conv_calls();
    base.push_back(execute(m, schedule_of(m, "store-all"), *cb, quick()));
    ASSERT_TRUE(base.back().ok()) << base.back().message;
    // A step runs each Conv's forward and backward at least once.
    const uint64_t taken = cb->lowp_conv_calls() - calls;
    if (mode == GemmMode::TensorCore) {
      EXPECT_GE(taken, 2u * static_cast<uint64_t>(convs));
    } else {
      EXPECT_EQ(taken, 0u);
    }
    EXPECT_EQ(base.back().memory.workspace, cb->cublas_workspace_bytes() + cb->conv_workspace_bytes());
    expect_bitwise_to(base.back(), m, *cb, {"recompute-all", "sqrt", "every-k:3"});
  }
  cb->set_conv_mode(was);
  EXPECT_LE(std::fabs(base[0].loss - base[1].loss), 32 * u * std::fabs(base[1].loss))
      << base[0].loss << " vs " << base[1].loss;
  EXPECT_LT(relative_error(base[0], base[1]).grad, 128 * u);
  std::cout << GetParam() << ": " << convs << " convolutions on cuDNN's 16-bit path; loss " << base[0].loss
            << " (tensor) vs " << base[1].loss << " (f32)\n";
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaMixedConv,
                         ::testing::Values("resnet:10:8:32:2:5:bf16@cuda", "resnet:10:4:64:4:5:f16",
                                           "resnet:18:8:32:2:10:bf16@cuda", "resnet:10:8:32:2:5:f16@cuda"),
                         case_name);

// --nondeterministic-backward (ExecOptions::nondeterministic_backward): the
// convolutions' backward takes cuDNN's first-ranked algorithm whatever its
// determinism. The forward does not change, so every strategy's loss has the
// deterministic run's bits, and the tracked peaks stay the simulator's. The
// gradients are the same sums in another order:
// - a weight-gradient element sums K = n·oh·ow products, an input-gradient
//   element at most k·r·s; two f32 orders of one sum differ by at most
//   2·γ_K·Σ|terms| (γ_K = K·u/(1 − K·u), u = 2⁻²⁴), taken relative to the
//   result (no cancellation amplification: batch norm after each convolution
//   keeps the terms and the sums of a size);
// - in the 16-bit plans cuDNN rounds dx and dW to the dtype after the sum: a
//   reordering can move that rounding by one unit, u16 = 2⁻⁸ (bf16);
// - the backward is linear in G for the saved activations, so the
//   perturbations of the L convolutions a gradient passes through add up.
// Bound on each parameter tensor's relative l2 error: L·(2γ_K + u16), K the
// largest sum of any convolution. (An f32 plan's deterministic algorithm may
// be FFT or Winograd, whose error is of another kind and not in this bound;
// GpuCnnKernels.ConvolutionMatchesCpuOnBothPaths holds those to 1e-3 of the
// CPU's per element, well inside it.) Measured figures are printed.
// The report names the convolutions' dropped guarantee, and a deterministic
// run after the option gives the first deterministic run's bits again (the
// plans hold both choices; none leaks into a run without the option).
class CudaNondeterministicBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaNondeterministicBackward, LossBitwiseGradientsWithinTheBoundAndReported) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  {  // conv_mode() reads f32 whatever was set where cuDNN does not run
    auto& probe = dynamic_cast<cuda::CudaBackend&>(gpu);
    const GemmMode was = probe.conv_mode();
    probe.set_conv_mode(GemmMode::TensorCore);
    const bool cudnn = probe.conv_mode() == GemmMode::TensorCore;
    probe.set_conv_mode(was);
    if (!cudnn) GTEST_SKIP() << "cuDNN does not run here: the convolutions run on im2col, deterministic";
  }
  const Model m = load_model(GetParam());
  int convs = 0;
  double k_max = 0;
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).kind != OpKind::Conv) continue;
    ++convs;
    const cpu::ConvGeom g = conv_geom(m, v);
    k_max = std::max({k_max, static_cast<double>(g.n * g.oh() * g.ow()), static_cast<double>(g.k * g.r * g.s)});
  }
  ASSERT_GT(convs, 0);
  const double u = 0x1p-24, gamma = k_max * u / (1 - k_max * u);
  const double u16 = m.op(m.size() - 2).dtype == DType::BF16 ? 0x1p-8 : m.op(m.size() - 2).dtype == DType::F16 ? 0x1p-11 : 0.0;
  const double bound = convs * (2 * gamma + u16);

  const ExecResult det = execute(m, schedule_of(m, "store-all"), gpu, quick());
  ASSERT_TRUE(det.ok()) << det.message;
  EXPECT_TRUE(det.nondeterministic.empty());
  ExecOptions o = quick();
  o.nondeterministic_backward = true;
  const ExecResult store = execute(m, schedule_of(m, "store-all"), gpu, o);
  ASSERT_TRUE(store.ok()) << store.message;
  // Where cuDNN ranks a deterministic algorithm first for every convolution
  // (a property of the library and the device, not a fault), nothing is
  // dropped: the report is empty and the run is the deterministic one.
  ASSERT_LE(store.nondeterministic.size(), 1u);
  const std::string line = store.nondeterministic.empty() ? std::string("nothing ranked non-deterministic first")
                                                          : store.nondeterministic[0];
  if (store.nondeterministic.empty()) {
    EXPECT_EQ(store.param_grads, det.param_grads);
  } else {
    EXPECT_EQ(line.rfind("cuDNN convolution backward: its first-ranked algorithm whatever its determinism, "
                         "non-deterministic (atomic sums) for ",
                         0),
              0u)
        << line;
    EXPECT_NE(line.find(" of " + std::to_string(convs) + " convolutions (backward-data "), std::string::npos) << line;
  }
  EXPECT_EQ(std::memcmp(&store.loss, &det.loss, sizeof(float)), 0) << store.loss << " vs " << det.loss;
  EXPECT_LE(relative_error(store, det).grad, bound);
  const auto& cb = dynamic_cast<cuda::CudaBackend&>(gpu);
  EXPECT_EQ(store.memory.workspace, cb.cublas_workspace_bytes() + cb.conv_workspace_bytes());
  std::cout << GetParam() << ": " << line << "; bound " << bound << ", store-all vs deterministic "
            << relative_error(store, det).grad;
  for (const char* spec : {"sqrt", "recompute-all", "every-k:3"}) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const ExecResult r = execute(m, s, gpu, o);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, s).peak_bytes);
    EXPECT_EQ(r.nondeterministic, store.nondeterministic);
    EXPECT_EQ(std::memcmp(&r.loss, &store.loss, sizeof(float)), 0) << r.loss << " vs " << store.loss;
    EXPECT_NE(sameness(r, store), Sameness::Differs);
    EXPECT_LE(relative_error(r, store).grad, bound);
    std::cout << ", " << spec << " vs store-all " << relative_error(r, store).grad;
  }
  std::cout << "\n";
  const ExecResult again = execute(m, schedule_of(m, "store-all"), gpu, quick());
  ASSERT_TRUE(again.ok()) << again.message;
  EXPECT_TRUE(again.nondeterministic.empty());
  EXPECT_EQ(again.param_grads, det.param_grads);
  EXPECT_EQ(again.grad_hash, det.grad_hash);
}

// A GPT under the option: only the embedding gradients add by atomicAdd
// (their bound is GpuCnnKernels.EmbeddingGradientInAnyOrder's); nothing reads
// a parameter gradient, so every other parameter's gradient keeps the
// deterministic run's bits, and so does every strategy's loss.
TEST(CudaNondeterministicBackwardGpt, OnlyTheEmbeddingGradientsChange) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  const Model m = make_preset("gpt:2:32:4:16:2:f32:64");
  int embeddings = 0;
  for (int v = 0; v < m.size(); ++v) embeddings += m.op(v).kind == OpKind::Embedding;
  ASSERT_GT(embeddings, 0);
  const ExecResult det = execute(m, schedule_of(m, "store-all"), gpu, quick());
  ASSERT_TRUE(det.ok()) << det.message;
  ExecOptions o = quick();
  o.nondeterministic_backward = true;
  const auto params = parameter_tensors(m);
  for (const char* spec : {"store-all", "sqrt", "recompute-all"}) {
    SCOPED_TRACE(spec);
    const ExecResult r = execute(m, schedule_of(m, spec), gpu, o);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.nondeterministic,
              std::vector<std::string>{"embedding gradient: atomicAdd, a repeated token's positions summed in any "
                                       "order, for " + std::to_string(embeddings) + " of " +
                                       std::to_string(embeddings) + " embeddings"});
    EXPECT_EQ(std::memcmp(&r.loss, &det.loss, sizeof(float)), 0) << r.loss << " vs " << det.loss;
    ASSERT_EQ(r.param_grads.size(), params.size());
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (m.op(params[k].op).kind == OpKind::Embedding) {
        for (const float g : r.param_grads[k]) ASSERT_TRUE(std::isfinite(g)) << params[k].name;
        continue;
      }
      EXPECT_EQ(r.param_grads[k], det.param_grads[k]) << params[k].name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, CudaNondeterministicBackward,
                         ::testing::Values("resnet:18:8:32:2:10", "resnet:18:8:32:2:10:bf16"), case_name);

// Compressed checkpoints on CUDA (gpu/kernels/convert.cu): the tracked peaks
// are the simulator's (C(v) at its stored size, on the device and in the
// pinned pool), two runs give the same bits, and the gradients are within the
// CPU tests' stated relative errors of CUDA's store-all (the loss exactly).
// Not run in this repository's CI (no GPU).
TEST(CudaBackend, CompressedCheckpointsPeaksReproducibleAndWithinError) {
  REQUIRE_CUDA();
  Backend& b = *device().backend;
  const Model m = make_preset("chain:12:256");
  const ExecResult base = execute(m, schedule_of(m, "store-all"), b, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  struct Case {
    const char* spec;
    double bound;
  };
  for (const Case& c : {Case{"sqrt+compress:bf16", 1e-2}, Case{"sqrt+compress:f16", 1e-3},
                        Case{"sqrt+compress:int8", 2e-2}, Case{"offload+sqrt+compress:bf16", 1e-2}}) {
    SCOPED_TRACE(c.spec);
    const Schedule s = schedule_of(m, c.spec);
    const Simulation sim = simulate(m, s);
    const ExecResult r = execute(m, s, b, quick());
    const ExecResult again = execute(m, s, b, quick());
    ASSERT_TRUE(r.ok() && again.ok()) << r.message << again.message;
    EXPECT_TRUE(r.compressed);
    EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
    EXPECT_EQ(r.host_tracked_peak_bytes, sim.peak_host_bytes);
    EXPECT_EQ(r.param_grads, again.param_grads);
    const ResultError e = relative_error(r, base);
    EXPECT_EQ(e.loss, 0.0);
    EXPECT_GT(e.grad, 0.0);
    EXPECT_LT(e.grad, c.bound);
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// dtr decides inside the run on the device too (docs/run.md): from the CUDA
// allocator's tracked count, what the simulation decided, under its budget,
// with store-all's gradients on that device bit for bit.
TEST(CudaBackend, DtrDecidesLiveAsSimulated) {
  REQUIRE_CUDA();
  Backend& gpu = *device().backend;
  for (const char* preset : {"mlp:4:16:4", "gpt:1:32:2:16:2"}) {
    SCOPED_TRACE(preset);
    const Model m = load_model(preset);
    const uint64_t low = simulate(m, schedule_of(m, "recompute-all")).peak_bytes;
    const uint64_t high = simulate(m, schedule_of(m, "store-all")).peak_bytes;
    const auto dtr = make_strategy("dtr:" + std::to_string(low + (high - low) / 3));
    const Schedule s = dtr->schedule(m), ref = schedule_of(m, "store-all");
    const Simulation sim = simulate(m, s), ref_sim = simulate(m, ref);
    const std::vector<ExecResult> r =
        execute_simulated(m, {{&ref, &ref_sim, nullptr}, {&s, &sim, dtr.get()}}, gpu, quick());
    ASSERT_TRUE(r[0].ok() && r[1].ok()) << r[0].message << r[1].message;
    EXPECT_TRUE(r[1].decided_live);
    EXPECT_EQ(r[1].tracked_peak_bytes, sim.peak_bytes);
    EXPECT_GT(sim.recompute_steps, 0u);
    EXPECT_EQ(r[1].grad_hash, r[0].grad_hash);
  }
}

}  // namespace
}  // namespace remat
