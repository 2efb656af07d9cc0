// Exceptions that carry a message meant for the user: what was wrong and where.
// The CLI prints them as one line and exits 2; the window shows them in a dialog.
#pragma once
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

}  // namespace remat
