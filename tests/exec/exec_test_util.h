// Shared helpers of the executor tests.
#pragma once
#include <string>
#include <vector>

#include "core/exec/cpu_backend.h"
#include "core/exec/executor.h"
#include "core/presets.h"
#include "core/simulator.h"
#include "core/strategy.h"

namespace remat::testing {

inline Schedule schedule_of(const Model& m, const std::string& spec) { return make_strategy(spec)->schedule(m); }

inline ExecOptions quick(uint64_t seed = 7) {
  ExecOptions o;
  o.seed = seed;
  o.repeat = 1;
  return o;
}

}  // namespace remat::testing
