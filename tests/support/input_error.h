// The message a bad input gets: what the tests of every "one clear message"
// compare, without a try/catch in each file.
#pragma once
#include <string>

#include "core/base/errors.h"

namespace remat::testing {

// The message of the InputError `f()` throws; `none` when it throws none.
template <class F>
std::string input_error_of(F&& f, const std::string& none = "no error") {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return none;
}

}  // namespace remat::testing
