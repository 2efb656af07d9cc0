// Stopping long core work that takes no cancel argument: a strategy's search
// runs inside simulate_strategies() -> Strategy::schedule(), whose signatures
// are shared by every strategy. A caller on a worker thread (the window's
// background jobs) opens a CancelScope with its flag; the search polls
// cancel_requested() where it already polls its deadline, and returns what it
// has (the caller then drops it). Thread-local: other threads are unaffected.
#pragma once
#include <atomic>

namespace remat {

class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// True when the innermost CancelScope of this thread has its flag set.
bool cancel_requested();

}  // namespace remat
