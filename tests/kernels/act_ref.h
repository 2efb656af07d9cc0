// Float64 references of the activations (cpu_kernels.h's Act) and their
// names for parameterised tests; shared by the activation and Dense tests.
#pragma once
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu::test {

inline double act_ref(Act act, double v) {
  switch (act) {
    case Act::ReLU: return v > 0 ? v : 0.0;
    case Act::Tanh: return std::tanh(v);
    case Act::GELU: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Act::Sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case Act::SiLU: return v / (1.0 + std::exp(-v));
    case Act::None: break;
  }
  return v;
}

// Names the instantiations (Acts/ActTest.X/GELU) so a failure says which Act.
inline std::string act_name(const testing::TestParamInfo<Act>& info) {
  static const char* const kNames[] = {"None", "ReLU", "Tanh", "GELU", "Sigmoid", "SiLU"};
  return kNames[static_cast<int>(info.param)];
}

}  // namespace remat::cpu::test
