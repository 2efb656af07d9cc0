// One check for the three path switches read from the environment
// (core/base/env_switch.h: REMAT_CUDA_GEMM, REMAT_CUDA_CONV, REMAT_CUDA_POINTWISE):
// unset and empty give the default, each value its mode, and a bad value one
// InputError that starts as `refusal_start` says.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "core/base/errors.h"
#include "tests/support/scoped_env.h"

namespace remat::testing {

template <class Mode, class Read>
void expect_env_switch(const char* var, Read read, Mode unset,
                       std::initializer_list<std::pair<const char*, Mode>> values, const char* bad,
                       const std::string& refusal_start) {
  const ScopedEnv env(var);
  env.set(nullptr);
  EXPECT_EQ(read(), unset);
  env.set("");
  EXPECT_EQ(read(), unset);
  for (const auto& [text, mode] : values) {
    env.set(text);
    EXPECT_EQ(read(), mode) << text;
  }
  env.set(bad);
  try {
    (void)read();
    ADD_FAILURE() << "no InputError for '" << bad << "'";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(refusal_start, 0), 0u) << e.what();
  }
}

}  // namespace remat::testing
