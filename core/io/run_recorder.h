// A backend wrapper that records what one execution did, for the trace and
// snapshot writers: every allocate/release with the instruction it happened
// in, the mark times, and per instruction the allocator's high-water mark of
// bytes in use (read between instructions through DeviceMemory::memory_stats()).
// It wraps two roles of the backend: its memory and its timing marks.
// The executor still gets its own figures: memory_stats() recombines the
// per-instruction readings into the whole run's (the maximum of high-water
// marks is the high-water mark), so a run with the recorder reports the same
// peaks as one without.
#pragma once
#include <unordered_map>
#include <vector>

#include "core/exec/forwarding_backend.h"
#include "core/io/torch_snapshot.h"

namespace remat {

struct RecordedRun {
  std::vector<AllocEvent> events;  // handle: the pointer; instruction: from the marks
  // Index k + 1 for the interval that ends at mark(k) (k = -1: before mark 0,
  // the input; k = n: after the last instruction): the allocator's high-water
  // mark in it, and its baseline part at that moment.
  std::vector<MemoryStats> intervals;
  std::vector<double> mark_ms;     // mark_times_ms() of the run
};

class RunRecorder : public WrappedBackend, public ForwardingMemory, public ForwardingTiming {
 public:
  explicit RunRecorder(Backend& inner)
      : WrappedBackend(inner), ForwardingMemory(inner.memory()), ForwardingTiming(inner.timing()) {}
  DeviceMemory& memory() override { return *this; }
  Timing& timing() override { return *this; }

  // One entry per begin_strategy(), holding the last run of that strategy
  // (the executor's runs are a warm-up and the timed ones: the last is timed).
  const std::vector<RecordedRun>& strategies() const { return runs_; }

  void begin_strategy() override;
  void begin_marks(std::size_t count) override;
  void mark(std::size_t index) override;
  std::vector<double> mark_times_ms() override;
  void* allocate(uint64_t bytes) override;
  void release(void* p) override;
  MemoryStats memory_stats() const override;
  // The inner peaks are reset at every mark: the run's tracked peak is the
  // maximum of the per-instruction ones, kept here since the executor's reset.
  void reset_peaks() override;
  uint64_t peak_bytes() const override;

 private:
  RecordedRun& run();

  std::vector<RecordedRun> runs_;
  std::unordered_map<void*, uint64_t> live_;  // bytes of each live allocation
  std::size_t instruction_ = AllocEvent::kBeforeStep;
  double last_mark_us_ = -1;
  uint64_t tracked_peak_ = 0;  // tracked high-water mark of the intervals closed since reset_peaks()
};

// Labels the measured events with the simulated ones of the same schedule:
// per instruction, events of equal size and direction are matched in order
// (the executor allocates what the memory model says, so all match; an
// unmatched one keeps "measured").
void label_measured(std::vector<AllocEvent>& measured, const std::vector<AllocEvent>& simulated);

}  // namespace remat
