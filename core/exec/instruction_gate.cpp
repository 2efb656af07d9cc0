#include "core/exec/instruction_gate.h"

#include <string_view>

#include "core/base/env_switch.h"

namespace remat {

bool gate_from_env() {
  return switch_from_env(
      "REMAT_CUDA_GATE", false,
      [](std::string_view v, bool& on) {
        if (v != "0" && v != "1") return false;
        on = v == "1";
        return true;
      },
      "is not 0 or 1 (1: each instruction's kernels timed alone, to see whether a step waits for the host)");
}

}  // namespace remat
