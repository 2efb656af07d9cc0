// Exceptions that carry a message meant for the user: what was wrong and where.
// The CLI prints them as one line and exits 2; the window shows them in a dialog.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace remat {

// A bad model, spec, flag or budget given by the user.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A schedule that breaks the memory model (reported with the instruction index).
class ScheduleError : public std::runtime_error {
 public:
  ScheduleError(std::size_t index, const std::string& what)
      : std::runtime_error("instruction " + std::to_string(index) + ": " + what), index_(index) {}
  std::size_t index() const { return index_; }

 private:
  std::size_t index_;
};

// The device (or the CPU backend's allocator) could not provide memory outside
// the executor's tracked tensors: the baseline, a scratch buffer, a library's
// workspace. The executor reports it as an out-of-memory result, never as a
// failure; backends map their own allocation errors (cudaErrorMemoryAllocation,
// CUBLAS_STATUS_ALLOC_FAILED) to it.
class DeviceOutOfMemory : public std::runtime_error {
 public:
  // `what` names the allocation ("the baseline (parameters, ...)", "scratch");
  // free_bytes is what the device said was free, or UINT64_MAX when unknown.
  DeviceOutOfMemory(const std::string& what, uint64_t needed, uint64_t free_bytes)
      : std::runtime_error(what), needed_(needed), free_(free_bytes) {}
  uint64_t needed() const { return needed_; }
  uint64_t free_bytes() const { return free_; }

 private:
  uint64_t needed_, free_;
};

// The device faulted while running kernels (an illegal address, a launch
// failure): the error is reported by whatever call comes next, possibly for a
// later instruction, and it may leave the device unusable (Timing::healthy(), core/exec/backend.h).
class DeviceFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bug in remat itself (a broken invariant), never the user's input: the CLI
// says "internal error" and asks for a report.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace remat
