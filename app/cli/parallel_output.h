// remat simulate --parallel: one table per strategy, a row per pipeline
// stage (every rank of a stage's tensor- and data-parallel groups holds the
// same), or the same as JSON with each stage's timeline and the schedule's
// grid; `csv` (when not empty) gets the per-stage figures, and csv's name
// with .timeline.csv in place of .csv the per-stage timelines (a row per
// strategy, stage and slot).
#pragma once
#include <string>
#include <vector>

#include "core/analysis/step_memory.h"
#include "core/sim/instruction_limit.h"
#include "core/sim/time_model.h"

namespace remat::cli {

void print_parallel(const std::string& model, const std::string& parallel, const std::vector<std::string>& strategies,
                    Optimizer optimizer, const TimeModel& time, const InstructionLimit& limit, bool json,
                    const std::string& csv);

}  // namespace remat::cli
