#include "core/io/run_recorder.h"

#include <algorithm>

namespace remat {

RecordedRun& RunRecorder::run() {
  if (runs_.empty()) runs_.emplace_back();
  return runs_.back();
}

void RunRecorder::begin_strategy() {
  inner().memory().begin_strategy();
  runs_.emplace_back();
}

void RunRecorder::begin_marks(std::size_t count) {
  inner().timing().begin_marks(count);
  run() = RecordedRun{};  // keep only the last run of the strategy
  live_.clear();
  instruction_ = AllocEvent::kBeforeStep;
  last_mark_us_ = -1;
}

void RunRecorder::mark(std::size_t index) {
  inner().timing().mark(index);
  // The allocator's high-water mark since the previous mark, then a fresh
  // start for the next instruction.
  run().intervals.push_back(inner().memory().interval_stats());
  tracked_peak_ = std::max(tracked_peak_, inner().memory().peak_bytes());
  inner().memory().reset_peaks();
  instruction_ = index;
}

std::vector<double> RunRecorder::mark_times_ms() {
  auto t = inner().timing().mark_times_ms();
  RecordedRun& r = run();
  r.mark_ms = t;
  for (auto& e : r.events) {
    const std::size_t k = e.instruction == AllocEvent::kBeforeStep ? 0 : std::min(e.instruction, t.size() - 1);
    if (!t.empty()) e.time_us = 1000.0 * t[k];
  }
  if (!t.empty()) last_mark_us_ = 1000.0 * t.back();
  return t;
}

void* RunRecorder::allocate(uint64_t bytes) {
  void* p = inner().memory().allocate(bytes);
  if (p) {
    live_[p] = bytes;
    run().events.push_back({true, reinterpret_cast<uint64_t>(p), bytes, instruction_, "", last_mark_us_});
  }
  return p;
}

void RunRecorder::release(void* p) {
  auto it = live_.find(p);
  if (it != live_.end()) {
    run().events.push_back({false, reinterpret_cast<uint64_t>(p), it->second, instruction_, "", last_mark_us_});
    live_.erase(it);
  }
  inner().memory().release(p);
}

void RunRecorder::reset_peaks() {
  inner().memory().reset_peaks();
  tracked_peak_ = 0;
}

uint64_t RunRecorder::peak_bytes() const { return std::max(tracked_peak_, inner().memory().peak_bytes()); }

MemoryStats RunRecorder::memory_stats() const {
  MemoryStats whole = inner().memory().memory_stats();  // the interval since the last mark
  if (runs_.empty()) return whole;
  const uint64_t device_used = whole.device_used;
  uint64_t reserved = whole.reserved_peak;
  for (const MemoryStats& s : runs_.back().intervals) {
    reserved = std::max(reserved, s.reserved_peak);
    if (s.allocator_peak > whole.allocator_peak) whole = s;
  }
  whole.reserved_peak = reserved;
  whole.device_used = device_used;
  return whole;
}

void label_measured(std::vector<AllocEvent>& measured, const std::vector<AllocEvent>& simulated) {
  std::unordered_map<std::size_t, std::vector<std::size_t>> by_instruction;
  for (std::size_t k = 0; k < simulated.size(); ++k) by_instruction[simulated[k].instruction].push_back(k);
  std::vector<uint8_t> used(simulated.size(), 0);
  for (auto& m : measured) {
    // The executor releases what is left once the step is over: no instruction did.
    m.label = m.alloc ? "measured (no instruction of the schedule allocates it)" : "released after the step";
    auto it = by_instruction.find(m.instruction);
    if (it == by_instruction.end()) continue;
    for (std::size_t k : it->second) {
      const AllocEvent& s = simulated[k];
      if (used[k] || s.alloc != m.alloc || s.bytes != m.bytes) continue;
      used[k] = 1;
      m.label = s.label;
      break;
    }
  }
}

}  // namespace remat
