// The CPU reference backend: float32, the remat::cpu kernels (Eigen GEMMs,
// single-threaded so results are bit-for-bit reproducible), host memory.
//
// Memory: every buffer (tracked tensors, baseline, scratch) comes from one
// HostAllocator (host_allocator.h), whose figures are memory_stats():
// - allocator_peak: bytes in use at the high-water mark, 64-byte rounding
//   included (none in exact mode);
// - reserved_peak: in use + released blocks kept for reuse;
// - device_used: the process's resident set (VmRSS) after the run, the
//   operating system's own view.
// Scratch (Dense's pre-activation gradient, the discarded input gradient of
// an op reading the model input) is sized at load() from op_exec.h.
//
// The host tier (offload/fetch) is a second HostAllocator, the host pool, in
// the same mode as the first and without a capacity: its tracked count and
// measured figures are separate from the "device" ones, and a copy is a
// memcpy (synchronous: nothing to overlap with on one thread).
//
// Compressed checkpoints are converted by core/kernels/convert.h.
#pragma once
#include <chrono>
#include <vector>

#include "core/exec/backend.h"
#include "core/exec/cpu_ops.h"
#include "core/exec/host_allocator.h"

namespace remat {

class CpuBackend final : public AllRolesBackend {
 public:
  CpuBackend() : CpuBackend(HostAllocator::Options{}) {}
  explicit CpuBackend(HostAllocator::Options memory);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  // TensorCore: each product the CUDA backend runs on 16-bit operands
  // (core/exec/gemm_path.h's lowp_gemm) reads the operands the mixed call
  // hands over, widened to f32, with the f32 kernels: the same bits as the
  // default F32 when those operands are the right ones (the CI's check of the
  // plumbing, which on the GPU feeds the tensor cores).
  void set_gemm_mode(GemmMode m) { state_.gemm_mode = m; }
  // The same for the convolutions (lowp_conv): the f32 convolution reads x,
  // W and G(v) widened from the codes handed over, and its results are
  // narrowed to the 16-bit places the CUDA backend's cuDNN writes (A(v), the
  // input's unwidened scratch) and widened from there, as on the GPU.
  void set_conv_mode(GemmMode m) { state_.conv_mode = m; }
  uint64_t lowp_gemm_calls() const { return state_.lowp_calls; }       // since construction
  uint64_t lowp_conv_calls() const { return state_.lowp_conv_calls; }  // the same for the convolutions
  // Direct: each op the CUDA backend runs on its tensors as stored
  // (core/exec/pointwise_path.h's lowp_io) runs its f32 kernel on f32 values
  // widened from exactly the tensors the mixed call hands over, the skipped
  // f32 copies holding NaN, and its result is rounded once into (or added
  // to) the stored tensor handed over: the same bits as the default F32 when
  // those are the right tensors (the CI's check of what the CUDA kernels get).
  void set_pointwise_mode(PointwiseMode m) { state_.pointwise_mode = m; }
  uint64_t lowp_io_calls() const { return state_.io_calls; }  // since construction
  // forward/backward calls that went through the mixed call (cpu_mixed.h),
  // since construction: the CUDA backend takes the same calls, each with its
  // scratch and (off the 16-bit paths) its widening and narrowing kernels.
  uint64_t mixed_calls() const { return mixed_calls_; }

  void load(const Model& model, const HostData& data) override;
  void zero_param_grads() override;
  uint64_t baseline_bytes() const override { return baseline_bytes_; }

  void* allocate(uint64_t bytes) override;
  void release(void* p) override;
  uint64_t live_bytes() const override { return live_; }
  uint64_t peak_bytes() const override { return peak_; }

  void begin_strategy() override;
  void reset_peaks() override;
  MemoryStats memory_stats() const override;
  MemoryStats interval_stats() const override { return alloc_.stats(); }  // no VmRSS read
  uint64_t device_free_bytes() const override;
  void upload(void* dst, const void* src, uint64_t bytes) override;
  void copy(void* dst, const void* src, uint64_t bytes) override;

  bool has_host_tier() const override { return true; }
  void* allocate_host(uint64_t bytes) override;
  void release_host(void* p) override;
  uint64_t host_peak_bytes() const override { return host_peak_; }
  MemoryStats host_memory_stats() const override { return host_alloc_.stats(); }
  void copy_to_host(void* host, const void* device, uint64_t bytes) override;
  void copy_to_device(void* device, const void* host, uint64_t bytes) override;

  bool can_compress() const override { return true; }
  void compress(void* packed, const void* f32, uint64_t elements, Packing p) override;
  void decompress(void* f32, const void* packed, uint64_t elements, Packing p) override;

  void forward(const Model& model, int op, const TensorTable& t) override;
  void backward(const Model& model, int op, const TensorTable& t, std::span<const uint8_t> accumulate) override;

  float read_loss() override { return state_.loss; }
  std::vector<float> read_param_grad(std::size_t index) override;
  float loss_scale() const override { return loss_scale_; }
  void back_off_loss_scale() override { loss_scale_ *= 0.5f; }

  void synchronize() override {}
  void begin_marks(std::size_t count) override;
  void mark(std::size_t index) override;
  std::vector<double> mark_times_ms() override;

 private:
  // A baseline or scratch buffer: DeviceOutOfMemory naming `what` when it does not fit.
  float* hold(uint64_t bytes, MemoryUse use, const char* what);
  void drop_baseline();

  HostAllocator alloc_;
  uint64_t live_ = 0, peak_ = 0;
  HostAllocator host_alloc_;  // the host tier
  uint64_t host_live_ = 0, host_peak_ = 0;
  std::vector<void*> held_;        // baseline and scratch buffers, released at the next load()
  std::vector<uint64_t> numel_;    // per parameter tensor
  uint64_t baseline_bytes_ = 0;
  float initial_loss_scale_ = 1.0f;  // GradScaler's for a model with f16 tensors (load())
  float loss_scale_ = 1.0f;          // now: initial_loss_scale_ at begin_strategy(), halved by backoffs
  CpuOpState state_;
  uint64_t mixed_calls_ = 0;

  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace remat
