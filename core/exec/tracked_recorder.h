// Records, per strategy, the tracked bytes of each instruction (after its
// allocations; after the release for a free), as the simulator counts them,
// from the executor's per-instruction marks: the window draws it beside the
// predicted timeline. The executor calls begin_strategy() once per strategy
// it starts, in order, and skips only a tail (after a cancel or an unusable
// device): the k-th timeline belongs to the k-th schedule. Wraps the
// backend's memory and timing roles.
#pragma once
#include <algorithm>
#include <vector>

#include "core/exec/forwarding_backend.h"

namespace remat {

class TrackedRecorder final : public WrappedBackend, public ForwardingMemory, public ForwardingTiming {
 public:
  explicit TrackedRecorder(Backend& inner)
      : WrappedBackend(inner), ForwardingMemory(inner.memory()), ForwardingTiming(inner.timing()) {}
  DeviceMemory& memory() override { return *this; }
  Timing& timing() override { return *this; }

  std::vector<std::vector<uint64_t>> timelines;

  void begin_strategy() override {
    timelines.emplace_back();
    inner().memory().begin_strategy();
  }
  void* allocate(uint64_t bytes) override {
    void* p = inner().memory().allocate(bytes);
    allocated_ = true;
    high_ = std::max(high_, inner().memory().live_bytes());
    return p;
  }
  void begin_marks(std::size_t count) override {
    if (!timelines.empty()) timelines.back().assign(count ? count - 1 : 0, 0);
    inner().timing().begin_marks(count);
  }
  void mark(std::size_t index) override {
    if (!timelines.empty() && index > 0 && index - 1 < timelines.back().size())
      timelines.back()[index - 1] = allocated_ ? high_ : inner().memory().live_bytes();
    allocated_ = false;
    high_ = 0;
    inner().timing().mark(index);
  }

 private:
  bool allocated_ = false;
  uint64_t high_ = 0;
};

}  // namespace remat
