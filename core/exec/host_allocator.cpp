#include "core/exec/host_allocator.h"

#include <algorithm>
#include <cstdlib>

namespace remat {
namespace {

constexpr uint64_t kAlign = 64;

}  // namespace

bool HostAllocator::default_exact() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

HostAllocator::~HostAllocator() {
  for (auto& [p, b] : blocks_) std::free(p);
  trim();
}

uint64_t HostAllocator::rounded(uint64_t bytes) const {
  if (opt_.exact) return std::max<uint64_t>(bytes, 1);
  return std::max<uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

void* HostAllocator::allocate(uint64_t bytes, MemoryUse use) {
  const uint64_t size = rounded(bytes);
  if (size > opt_.capacity || in_use_ > opt_.capacity - size) return nullptr;
  void* p = nullptr;
  if (auto it = cache_.find(size); it != cache_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
  } else {
    p = opt_.exact ? std::malloc(size) : std::aligned_alloc(kAlign, size);
    if (!p) return nullptr;
  }
  blocks_.emplace(p, Block{bytes, size, use});
  in_use_ += size;
  asked_[static_cast<int>(use)] += bytes;
  note();
  return p;
}

void HostAllocator::release(void* p) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  const Block b = it->second;
  blocks_.erase(it);
  in_use_ -= b.size;
  asked_[static_cast<int>(b.use)] -= b.asked;
  if (opt_.exact) {
    std::free(p);
  } else {
    cache_[b.size].push_back(p);
    cached_ += b.size;
  }
  note();
}

std::optional<uint64_t> HostAllocator::asked_bytes(void* p, MemoryUse use) const {
  const auto it = blocks_.find(p);
  if (it == blocks_.end() || it->second.use != use) return std::nullopt;
  return it->second.asked;
}

void HostAllocator::trim() {
  for (auto& [size, ps] : cache_)
    for (void* p : ps) std::free(p);
  cache_.clear();
  cached_ = 0;
}

void HostAllocator::note() {
  peak_.reserved_peak = std::max(peak_.reserved_peak, in_use_ + cached_);
  if (in_use_ < peak_.allocator_peak) return;
  peak_.allocator_peak = in_use_;
  peak_.baseline = asked_[static_cast<int>(MemoryUse::Baseline)];
  peak_.tensors = asked_[static_cast<int>(MemoryUse::Tensor)];
  peak_.scratch = asked_[static_cast<int>(MemoryUse::Scratch)];
  peak_.workspace = asked_[static_cast<int>(MemoryUse::Workspace)];
}

void HostAllocator::reset_peaks() {
  peak_ = MemoryStats{};
  note();
}

MemoryStats HostAllocator::stats() const { return peak_; }

}  // namespace remat
