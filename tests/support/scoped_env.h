// An environment variable set (or unset) for one scope, and put back as it
// was after it, for the tests of switches read from the environment
// (REMAT_CUDA_GEMM, ..._CONV, ..._POINTWISE).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace remat::testing {

class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~ScopedEnv() { set(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  // nullptr unsets it.
  void set(const char* value) const {
    if (value) ::setenv(name_.c_str(), value, 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace remat::testing
