// How a GPU test reacts to a machine without a usable device: it skips with the
// runtime's reason, except where REMAT_REQUIRE_CUDA=1 (the GPU machine's test
// step, gpu/device/test.sh) makes that a failure, so a broken driver or a build
// that cannot see the device is never reported as "all passed".
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace remat::testing {

inline bool cuda_required() {
  const char* v = std::getenv("REMAT_REQUIRE_CUDA");
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace remat::testing

// `why` is a std::string; empty means a device is there.
#define REMAT_SKIP_WITHOUT_CUDA(why)                                                      \
  do {                                                                              \
    const std::string remat_why_ = (why);                                           \
    if (!remat_why_.empty()) {                                                      \
      if (::remat::testing::cuda_required())                                        \
        FAIL() << "REMAT_REQUIRE_CUDA=1 but no CUDA device: " << remat_why_;        \
      GTEST_SKIP() << "no CUDA device: " << remat_why_;                             \
    }                                                                               \
  } while (0)
