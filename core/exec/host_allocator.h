// The CPU backend's allocator. Every buffer the backend holds comes from here
// (tracked tensors, baseline, scratch), so what it reports is what was
// allocated, its rounding included: the CPU's "allocator peak" is a
// measurement, as the CUDA pool's statistics are on the GPU.
//
// Two modes:
// - pooled (the default): 64-byte aligned blocks rounded up to 64 bytes; a
//   released block is kept for the next request of its rounded size, because a
//   training step frees and re-allocates the same sizes and fresh pages from the
//   OS cost a page fault each. Cached blocks count as reserved, not in use.
// - exact (the default under AddressSanitizer): exactly the bytes asked,
//   released to the system at once, so a kernel that reads a freed tensor is
//   caught.
// A capacity makes it a small device: a request that would take the bytes in
// use past it fails (nullptr), as a full GPU would.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/exec/backend.h"

namespace remat {

class HostAllocator {
 public:
  struct Options {
    bool exact = default_exact();
    uint64_t capacity = std::numeric_limits<uint64_t>::max();  // bytes in use allowed
  };
  static bool default_exact();

  HostAllocator() : HostAllocator(Options{}) {}
  explicit HostAllocator(Options options) : opt_(options) {}
  ~HostAllocator();
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;

  // nullptr when the capacity would be exceeded or the system has no memory.
  void* allocate(uint64_t bytes, MemoryUse use);
  void release(void* p);  // unknown pointers and nullptr are ignored
  // The bytes asked for p when it is a live block of that use; nullopt otherwise.
  std::optional<uint64_t> asked_bytes(void* p, MemoryUse use) const;
  void trim();            // cached blocks back to the system

  void reset_peaks();  // high-water marks back to now
  MemoryStats stats() const;
  uint64_t in_use_bytes() const { return in_use_; }
  uint64_t reserved_bytes() const { return in_use_ + cached_; }
  uint64_t free_bytes() const { return opt_.capacity - std::min(opt_.capacity, in_use_); }
  const Options& options() const { return opt_; }

 private:
  struct Block {
    uint64_t asked, size;  // size: as allocated (rounded)
    MemoryUse use;
  };
  uint64_t rounded(uint64_t bytes) const;
  void note();

  Options opt_;
  std::unordered_map<void*, Block> blocks_;
  std::unordered_map<uint64_t, std::vector<void*>> cache_;  // by size
  uint64_t in_use_ = 0, cached_ = 0;
  uint64_t asked_[4] = {0, 0, 0, 0};  // per MemoryUse, as asked
  MemoryStats peak_;                  // at the in-use high-water mark
};

}  // namespace remat
