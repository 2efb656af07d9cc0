// A switch read from the environment (REMAT_CUDA_GEMM, REMAT_CUDA_CONV,
// REMAT_CUDA_POINTWISE): unset or empty is the default; any other value must
// parse, else one InputError naming the variable and the value.
#pragma once
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/base/errors.h"

namespace remat {

// `parse(text, mode)` sets mode and returns true for a value it knows;
// `refusal` follows "VAR: 'value' " in the error ("is not a GEMM path (…)").
template <class Mode, class Parse>
Mode switch_from_env(const char* var, Mode unset, Parse parse, std::string_view refusal) {
  const char* env = std::getenv(var);
  Mode m = unset;
  if (env && *env && !parse(env, m)) throw InputError(std::string(var) + ": '" + env + "' " + std::string(refusal));
  return m;
}

}  // namespace remat
