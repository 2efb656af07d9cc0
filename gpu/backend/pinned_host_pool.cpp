#include "gpu/backend/pinned_host_pool.h"

#include <algorithm>

namespace remat::cuda {
namespace {

void wait_and_destroy(cudaEvent_t e) {
  if (!e) return;
  (void)cudaEventSynchronize(e);
  (void)cudaEventDestroy(e);
}

}  // namespace

PinnedHostPool::~PinnedHostPool() {
  trim();
  for (auto& [p, bytes] : live_) (void)cudaFreeHost(p);
  (void)cudaGetLastError();
}

void* PinnedHostPool::allocate(uint64_t bytes) {
  void* p = nullptr;
  auto& list = cache_[bytes];
  if (!list.empty()) {
    Cached c = list.back();
    list.pop_back();
    wait_and_destroy(c.copy_done);  // a fetch may still be reading it
    cached_ -= bytes;
    p = c.p;
  } else if (cudaMallocHost(&p, std::max<uint64_t>(bytes, 1)) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  live_[p] = bytes;
  in_use_ += bytes;
  tracked_peak_ = std::max(tracked_peak_, in_use_);
  used_high_ = std::max(used_high_, in_use_);
  reserved_high_ = std::max(reserved_high_, in_use_ + cached_);
  return p;
}

void PinnedHostPool::release(void* p, cudaEvent_t copy_done) {
  const auto it = live_.find(p);
  if (it == live_.end()) {
    if (copy_done) (void)cudaEventDestroy(copy_done);
    return;
  }
  const uint64_t bytes = it->second;
  live_.erase(it);
  in_use_ -= bytes;
  cached_ += bytes;
  cache_[bytes].push_back({p, copy_done});
}

void PinnedHostPool::trim() {
  for (auto& [bytes, list] : cache_) {
    for (Cached& c : list) {
      wait_and_destroy(c.copy_done);
      (void)cudaFreeHost(c.p);
    }
  }
  cache_.clear();
  cached_ = 0;
  (void)cudaGetLastError();
}

void PinnedHostPool::reset_peaks() {
  tracked_peak_ = in_use_;
  used_high_ = in_use_;
  reserved_high_ = in_use_ + cached_;
}

MemoryStats PinnedHostPool::stats() const {
  MemoryStats s;
  s.allocator_peak = used_high_;  // pinned buffers are exactly the bytes asked: no rounding of ours
  s.reserved_peak = reserved_high_;
  s.tensors = tracked_peak_;
  return s;
}

}  // namespace remat::cuda
