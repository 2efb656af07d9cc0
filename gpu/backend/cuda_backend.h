// The CUDA backend: remat::Backend on one device, one stream and one cuBLAS
// handle bound to it (cuBLAS gives the same bits for one handle on one stream,
// so every strategy reproduces store-all bit for bit). The kernels are
// gpu/kernels/cuda_kernels.h; nothing here launches a kernel of its own.
//
// Memory figures (the CPU backend's meanings, cpu_backend.h):
// - live/peak_bytes: tracked activations and gradients, exactly the bytes the
//   executor asked for, from a dedicated stream-ordered pool (device_allocator.h).
// - baseline_bytes: as the CPU: parameters and their gradients, target/labels
//   and the loss scalar, as asked (each tensor is 256-byte aligned underneath).
// - device_peak_bytes: what this backend held at its high-water mark since
//   reset_peaks(): the baseline buffers as allocated, scratch buffers, cuBLAS's
//   workspace (its documented default size: the kernels reset the handle's
//   stream before each GEMM, which returns cuBLAS to its own workspace pool) and
//   the pool's cudaMemPoolAttrUsedMemHigh (the tracked peak with the allocator's
//   rounding). Not counted: the CUDA context and cuBLAS's code, which the driver
//   keeps outside any allocation (see load_free_bytes()).
// - device_free_bytes: cudaMemGetInfo's free bytes now, plus what the pool holds
//   unused (it is reused before the driver is asked).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/exec/backend.h"
#include "gpu/backend/device_allocator.h"
#include "gpu/backend/event_timer.h"

namespace remat::cuda {

class CudaBackend final : public remat::Backend {
 public:
  explicit CudaBackend(int device);  // throws CudaError
  ~CudaBackend() override;           // never throws

  std::string name() const override { return name_; }

  void load(const Model& model, const HostData& data) override;
  void zero_param_grads() override;
  uint64_t baseline_bytes() const override { return baseline_bytes_; }

  void* allocate(uint64_t bytes) override;
  void release(void* p) override;
  uint64_t live_bytes() const override { return pool_->live_bytes(); }
  uint64_t peak_bytes() const override { return pool_->peak_bytes(); }
  uint64_t device_peak_bytes() const override;
  void reset_peaks() override;
  uint64_t device_free_bytes() const override;
  void upload(void* dst, const void* src, uint64_t bytes) override;

  void forward(const Model& model, int op, const TensorTable& t) override;
  void backward(const Model& model, int op, const TensorTable& t, std::span<const uint8_t> accumulate) override;

  float read_loss() override;
  std::vector<float> read_param_grad(std::size_t index) override;

  void synchronize() override;
  void begin_marks(std::size_t count) override;
  void mark(std::size_t index) override;
  std::vector<double> mark_times_ms() override;

  // Beyond the interface, for benchmarks and reports.
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  uint64_t pool_reserved_high_bytes() const { return pool_->reserved_high_bytes(); }
  uint64_t cublas_workspace_bytes() const { return workspace_bytes_; }
  uint64_t scratch_bytes() const { return scratch_[0].bytes() + scratch_[1].bytes(); }
  // cudaMemGetInfo's free bytes before and after the last load().
  uint64_t load_free_bytes_before() const { return free_before_load_; }
  uint64_t load_free_bytes_after() const { return free_after_load_; }

 private:
  float* scratch(int which, int64_t floats);  // grows scratch buffer `which` (stream-safe)
  const float* param(int op, int slot) const;
  float* param_grad(int op, int slot) const;

  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  uint64_t workspace_bytes_ = 0;
  // Declared after the stream: destroyed before it.
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<EventTimer> timer_;

  // Baseline: all parameters in one buffer, all their gradients in another
  // (one memset zeroes them), at 256-byte aligned offsets.
  DeviceBuffer params_, grads_, target_, labels_, loss_;
  std::vector<uint64_t> offset_;   // per parameter tensor, in floats
  std::vector<uint64_t> numel_;    // per parameter tensor
  std::vector<int> first_param_;   // per op: index into offset_, -1 when none
  uint64_t target_n_ = 0, labels_n_ = 0;
  uint64_t seed_ = 0;
  bool loaded_ = false;  // false until a load() succeeded
  uint64_t baseline_bytes_ = 0;
  DeviceBuffer scratch_[2];
  uint64_t baseline_device_bytes_ = 0;  // the baseline buffers as allocated
  uint64_t free_before_load_ = 0, free_after_load_ = 0;
};

}  // namespace remat::cuda
