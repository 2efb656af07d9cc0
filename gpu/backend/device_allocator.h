// Device memory of the CUDA backend, in two kinds:
// - DevicePool: the tracked activations and gradients, from CUDA's stream-ordered
//   allocator (cudaMallocAsync on a dedicated pool that keeps freed memory, so a
//   schedule's allocate/release pairs do not go back to the driver). It counts the
//   bytes asked for exactly (the allocator's rounding is not counted) and reads
//   the pool's own high-water marks for the device figure.
// - DeviceBuffer: baseline and scratch (parameters, gradients, target, labels,
//   loss, Dense's pre-activation gradient), plain cudaMalloc, move-only RAII as
//   tiny-cuda-nn's GPUMemory, with a process-wide live-bytes counter.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

namespace remat::cuda {

class DevicePool {
 public:
  DevicePool(int device, cudaStream_t stream);  // throws CudaError
  ~DevicePool();                                // frees what is still held; never throws
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // `bytes` from the pool in stream order, or nullptr when the device cannot
  // provide them (cudaErrorMemoryAllocation even after trimming the pool; the
  // error is cleared). Other failures throw CudaError. 0 bytes gets 1.
  void* allocate(uint64_t bytes);
  // Stream-ordered free; unknown pointers are ignored (as the CPU backend).
  // Never throws (it runs in destructors).
  void release(void* p);

  uint64_t live_bytes() const { return live_; }  // exact, as asked
  uint64_t peak_bytes() const { return peak_; }  // since reset_peaks()
  // The pool's figures, allocator rounding included: in use by us (used) and
  // taken from the driver (reserved), now and at their high-water marks.
  uint64_t used_high_bytes() const;
  uint64_t reserved_high_bytes() const;
  uint64_t reserved_bytes() const;
  // Reserved but not in use now (what the pool can hand out without the driver); 0 on error.
  uint64_t unused_reserved_bytes() const noexcept;
  // Tracked peak back to live; the pool's high-water marks back to now.
  void reset_peaks();

 private:
  uint64_t attribute(cudaMemPoolAttr attr) const;

  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_;
  std::unordered_map<void*, uint64_t> blocks_;
  uint64_t live_ = 0, peak_ = 0;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(uint64_t bytes);  // cudaMalloc; throws CudaError (out_of_memory())
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  uint64_t bytes() const { return bytes_; }

  // Bytes held by every DeviceBuffer of the process now.
  static uint64_t total_live_bytes();

 private:
  void reset() noexcept;
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace remat::cuda
