// How many times this process ran the steps a run should do once: the
// executability check, making a strategy (make_strategy, a modifier's inner
// strategy included) and simulating a schedule. Read by the tests that pin the
// run session's work (tests/exec/test_run_session.cpp); relaxed atomics, a
// few nanoseconds per call to steps that take far longer.
#pragma once
#include <atomic>
#include <cstdint>

namespace remat {

struct WorkCounts {
  uint64_t executability_checks = 0;
  uint64_t strategies_made = 0;
  uint64_t simulations = 0;
};

namespace work_counter {
inline std::atomic<uint64_t> executability_checks{0};
inline std::atomic<uint64_t> strategies_made{0};
inline std::atomic<uint64_t> simulations{0};
inline void count(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
}  // namespace work_counter

inline WorkCounts work_counts() {
  return {work_counter::executability_checks.load(std::memory_order_relaxed),
          work_counter::strategies_made.load(std::memory_order_relaxed),
          work_counter::simulations.load(std::memory_order_relaxed)};
}

}  // namespace remat
