// The CUDA backend: remat::Backend on one device, one stream and one cuBLAS
// handle bound to it (cuBLAS gives the same bits for one handle on one stream,
// so every strategy reproduces store-all bit for bit). The kernel entries are
// cuda_ops.h; nothing here launches a kernel of its own.
//
// Memory: every device buffer comes from one stream-ordered pool
// (device_allocator.h): the tracked tensors, the baseline, scratch and the
// cuBLAS workspace (set with cublasSetWorkspace, so cuBLAS allocates nothing of
// its own). memory_stats() is the pool's statistics:
// - allocator_peak: cudaMemPoolAttrUsedMemHigh since reset_peaks();
// - reserved_peak: cudaMemPoolAttrReservedMemHigh (begin_strategy() trims the
//   pool to what is in use, so no strategy inherits another's reservation);
// - device_used: cudaMemGetInfo's total − free after the run, the device's
//   own view (the CUDA context, loaded code and other processes included);
// - the parts (baseline, tensors, scratch, workspace) as asked, and the
//   pool's rounding as the rest.
// Errors: an allocation the pool cannot serve is nullptr (tracked tensors) or
// DeviceOutOfMemory (everything else, CUBLAS_STATUS_ALLOC_FAILED included); a
// kernel fault is DeviceFault and leaves the backend unhealthy until
// recover() resets the device; other CUDA failures are CudaError.
//
// The host tier (offload/fetch): pinned host buffers (pinned_host_pool.h) and
// a second, copy stream. Events order it against the compute stream: an
// offload's copy waits for the compute that wrote the tensor, and its device
// buffer is freed in the copy stream's order (so the pool reuses it only
// after the copy); a fetch's copy waits for its buffer's allocation, and the
// compute waits for the copy only before the first kernel that reads it
// (wait_for_copy), so the copy overlaps the compute in between.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/exec/backend.h"
#include "gpu/backend/cuda_ops.h"
#include "gpu/backend/device_allocator.h"
#include "gpu/backend/event_timer.h"
#include "gpu/backend/gated_timer.h"
#include "gpu/backend/pinned_host_pool.h"

namespace remat::cuda {

class CudaBackend final : public remat::AllRolesBackend {
 public:
  explicit CudaBackend(int device);  // throws CudaError
  ~CudaBackend() override;           // never throws

  std::string name() const override { return name_; }
  // How mixed precision's products run (core/exec/gemm_path.h): REMAT_CUDA_GEMM
  // at construction; the tests switch it to compare the two paths.
  GemmMode gemm_mode() const { return state_.gemm_mode; }
  void set_gemm_mode(GemmMode m) { state_.gemm_mode = m; }
  // The convolutions' (lowp_conv): REMAT_CUDA_CONV at construction; the f32
  // path wherever cuDNN does not run. Set before load(), which sizes the
  // convolution workspace for the algorithms of the path.
  GemmMode conv_mode() const { return state_.cudnn ? state_.conv_mode : GemmMode::F32; }
  void set_conv_mode(GemmMode m) { state_.conv_mode = m; }
  uint64_t lowp_gemm_calls() const { return state_.lowp_calls; }       // since create()
  uint64_t lowp_conv_calls() const { return state_.lowp_conv_calls; }  // the same for the convolutions
  // How mixed precision's memory-bound ops run (core/exec/pointwise_path.h):
  // REMAT_CUDA_POINTWISE at construction, settable for the tests.
  PointwiseMode pointwise_mode() const { return state_.pointwise_mode; }
  void set_pointwise_mode(PointwiseMode m) { state_.pointwise_mode = m; }
  uint64_t lowp_io_calls() const { return state_.io_calls; }  // since create()

  void load(const Model& model, const HostData& data) override;
  void zero_param_grads() override;
  uint64_t baseline_bytes() const override { return baseline_bytes_; }

  void* allocate(uint64_t bytes) override;
  void release(void* p) override;
  uint64_t live_bytes() const override;
  uint64_t peak_bytes() const override;

  void begin_strategy() override;
  void reset_peaks() override;
  MemoryStats memory_stats() const override;
  MemoryStats interval_stats() const override;  // no cudaMemGetInfo
  uint64_t device_free_bytes() const override;
  bool healthy() const override { return healthy_; }
  std::string recover(const Model& model, const HostData& data) override;
  void upload(void* dst, const void* src, uint64_t bytes) override;
  void copy(void* dst, const void* src, uint64_t bytes) override;

  bool has_host_tier() const override { return true; }
  void* allocate_host(uint64_t bytes) override;
  void release_host(void* p) override;
  uint64_t host_peak_bytes() const override { return host_pool_ ? host_pool_->tracked_peak_bytes() : 0; }
  MemoryStats host_memory_stats() const override { return host_pool_ ? host_pool_->stats() : MemoryStats{}; }
  void copy_to_host(void* host, const void* device, uint64_t bytes) override;
  void copy_to_device(void* device, const void* host, uint64_t bytes) override;
  void wait_for_copy(const void* device) override;
  // Compressed checkpoints: gpu/kernels/convert.cu on the compute stream.
  bool can_compress() const override { return true; }
  void compress(void* packed, const void* f32, uint64_t elements, Packing p) override;
  void decompress(void* f32, const void* packed, uint64_t elements, Packing p) override;

  void forward(const Model& model, int op, const TensorTable& t) override;
  void backward(const Model& model, int op, const TensorTable& t, std::span<const uint8_t> accumulate) override;

  // GradScaler's loss scale for a model with f16 tensors (docs/memory-model.md).
  float loss_scale() const override { return loss_scale_; }
  void back_off_loss_scale() override { loss_scale_ *= 0.5f; }

  float read_loss() override;
  std::vector<float> read_param_grad(std::size_t index) override;

  // --nondeterministic-backward (CudaOpState::nondeterministic_backward): kept
  // across loads and device resets; what the loaded model runs that way is
  // counted at load() (cuDNN's backward algorithms per convolution, the
  // embedding gradients).
  void allow_nondeterministic_backward(bool allow) override { state_.nondeterministic_backward = allow; }
  std::vector<std::string> nondeterministic_backward() const override { return nondeterministic_; }

  void synchronize() override;
  void begin_marks(std::size_t count) override;
  void mark(std::size_t index) override;
  std::vector<double> mark_times_ms() override;

  // Beyond the interface, for benchmarks, tests and reports.
  cudaStream_t stream() const { return state_.stream; }
  // REMAT_CUDA_GATE=1: gates that let go on their time limit in the last run (0 ungated).
  int gate_timeouts() const { return gated_ ? gated_->timeouts() : 0; }
  cublasHandle_t cublas() const { return state_.cublas; }
  uint64_t cublas_workspace_bytes() const { return workspace_bytes_; }
  // The loaded model's convolution workspace (0 without a Conv).
  uint64_t conv_workspace_bytes() const { return state_.conv_workspace_bytes; }

 private:
  void create();   // stream, handle, pool, workspace, timer; throws CudaError
  void destroy();  // the reverse; never throws
  void drop_baseline();
  // An event recorded now on `stream` (no timing).
  cudaEvent_t record_on(cudaStream_t stream);
  void drop_copy_events();  // after both streams are idle
  void let_go();            // before a wait for the stream: the gate must not hold it
  // A pool buffer that must exist: DeviceOutOfMemory naming `what` when it cannot.
  // `counted`: the payload when `bytes` includes our own layout's padding.
  void* hold(uint64_t bytes, MemoryUse use, const char* what, std::optional<uint64_t> counted = std::nullopt);
  // Runs f, turning CUDA errors into the core's: out of memory, device fault.
  template <typename F>
  auto guarded(F&& f) -> decltype(f());

  int device_ = 0;
  float initial_loss_scale_ = 1.0f;  // at load(): kF16LossScale with f16 tensors
  float loss_scale_ = 1.0f;          // initial_loss_scale_ at begin_strategy(), halved by backoffs
  std::string name_;
  bool healthy_ = true;
  uint64_t workspace_bytes_ = 0;
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<GatedTimer> gated_;  // REMAT_CUDA_GATE=1: marks time each instruction alone
  cudaStream_t copy_stream_ = nullptr;
  std::unique_ptr<PinnedHostPool> host_pool_;
  // Copies in flight, by the buffer they use: device buffers an offload still
  // reads (freed on the copy stream), device buffers a fetch still writes
  // (waited for before a kernel reads them), host buffers a fetch still reads.
  std::unordered_map<const void*, cudaEvent_t> offloading_, fetching_, host_reads_;
  CudaOpState state_;
  std::vector<void*> held_;        // baseline, scratch and workspace buffers
  std::vector<uint64_t> numel_;    // per parameter tensor
  uint64_t baseline_bytes_ = 0;
  uint64_t grads_bytes_ = 0;       // the one buffer of all parameter gradients (state_.grads.front())
  bool loaded_ = false;
  int model_size_ = 0;
  std::vector<std::string> nondeterministic_;  // of the loaded model, made at load()
};

}  // namespace remat::cuda
