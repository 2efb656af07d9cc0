// The CUDA backend's host tier: page-locked (pinned) host buffers, so that an
// offload or fetch is a true asynchronous DMA on the copy stream rather than a
// staged copy. Pinning is slow (cudaMallocHost maps and locks pages), so
// released buffers are kept per size for the next offload, as the CPU
// backend's pool keeps its blocks. A released buffer may still be read by a
// fetch in flight: it carries the copy stream's event and is reused only once
// that event has completed.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/exec/backend.h"  // MemoryStats

namespace remat::cuda {

class PinnedHostPool {
 public:
  PinnedHostPool() = default;
  ~PinnedHostPool();  // waits for pending copies and frees every buffer; never throws
  PinnedHostPool(const PinnedHostPool&) = delete;
  PinnedHostPool& operator=(const PinnedHostPool&) = delete;

  // nullptr when the system cannot pin the bytes (the error is cleared).
  void* allocate(uint64_t bytes);
  // Back to the cache once `copy_done` (recorded after the last copy reading
  // it; may be null) has completed. Unknown pointers are ignored.
  void release(void* p, cudaEvent_t copy_done);
  void trim();  // cached buffers back to the system (waits for their copies)

  void reset_peaks();
  uint64_t tracked_peak_bytes() const { return tracked_peak_; }
  MemoryStats stats() const;  // allocator_peak: pinned bytes in use; reserved: + cached

 private:
  struct Cached {
    void* p;
    cudaEvent_t copy_done;  // null once known complete
  };
  std::unordered_map<void*, uint64_t> live_;                   // in use: bytes
  std::unordered_map<uint64_t, std::vector<Cached>> cache_;    // released, by bytes
  uint64_t in_use_ = 0, cached_ = 0, tracked_peak_ = 0, used_high_ = 0, reserved_high_ = 0;
};

}  // namespace remat::cuda
