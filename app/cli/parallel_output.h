// remat simulate --parallel: one table per strategy, a row per pipeline
// stage (every rank of a stage's tensor- and data-parallel groups holds the
// same), or the same as JSON.
#pragma once
#include <string>
#include <vector>

#include "core/analysis/step_memory.h"
#include "core/sim/instruction_limit.h"
#include "core/sim/time_model.h"

namespace remat::cli {

void print_parallel(const std::string& model, const std::string& parallel, const std::vector<std::string>& strategies,
                    Optimizer optimizer, const TimeModel& time, const InstructionLimit& limit, bool json);

}  // namespace remat::cli
