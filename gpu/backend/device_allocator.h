// The CUDA backend's one allocator: every device buffer it holds (tracked
// activations and gradients, the baseline, scratch, cuBLAS's workspace) comes
// from a dedicated stream-ordered pool (cudaMallocFromPoolAsync on a pool that
// keeps freed memory, so a schedule's allocate/release pairs do not go back to
// the driver). Its figures are the pool's own statistics: used and reserved
// bytes and their high-water marks, the allocator's rounding included. Beside
// them it keeps, per use, the bytes asked for, so that a report can split the
// pool's peak into baseline, tensors, scratch, workspace and rounding.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "core/exec/backend.h"  // MemoryUse

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
  // `counted` (default: bytes) is what the books record for the use: a caller
  // that pads its own layout counts only the payload, the padding shows as
  // rounding.
  void* allocate(uint64_t bytes, MemoryUse use, std::optional<uint64_t> counted = std::nullopt);
  // Stream-ordered free; unknown pointers are ignored. Never throws (it runs
  // in destructors); a sticky error shows again at the next checked call.
  void release(void* p);
  // The same, in `stream`'s order (another stream still reading p: the copy stream).
  void release_on(void* p, cudaStream_t stream);
  // The bytes asked for p when it is a live block of that use.
  std::optional<uint64_t> asked_bytes(void* p, MemoryUse use) const;

  uint64_t asked_bytes(MemoryUse use) const { return asked_[static_cast<int>(use)]; }
  uint64_t tensor_peak_bytes() const { return tensor_peak_; }  // tracked, as asked, since reset_peaks()

  // The pool's own figures (cudaMemPoolAttr*): in use and reserved from the
  // driver, now and at their high-water marks since reset_peaks().
  uint64_t used_high_bytes() const;
  uint64_t reserved_high_bytes() const;
  uint64_t reserved_bytes() const;
  // Reserved but not in use now (what the pool can hand out without the driver); 0 on error.
  uint64_t unused_reserved_bytes() const noexcept;

  // High-water marks back to now (the tracked one and the pool's).
  void reset_peaks();
  // Waits for the stream and hands every unused reserved byte back to the driver.
  void trim();

 private:
  uint64_t attribute(cudaMemPoolAttr attr) const;

  struct Block {
    uint64_t asked;
    MemoryUse use;
  };
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_;
  std::unordered_map<void*, Block> blocks_;
  uint64_t asked_[4] = {0, 0, 0, 0};
  uint64_t tensor_peak_ = 0;
};

}  // namespace remat::cuda
