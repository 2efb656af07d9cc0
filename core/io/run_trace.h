// `remat run --trace FILE`: the Chrome/Perfetto trace of the strategies that
// ran (chrome_trace.h), matched with what the recorder saw. The path is
// checked before the run so that a bad one costs no execution.
#pragma once
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/exec/executor.h"
#include "core/io/run_recorder.h"

namespace remat {

void check_trace_path(const std::string& path);  // InputError unless .json in an existing folder
// `sims` and `results` are parallel, in the order the strategies ran;
// `recorded`: RunRecorder::strategies() of that run.
void write_run_trace(const std::string& path, const Model& model, const std::string& backend,
                     const std::vector<StrategyRun>& sims, const std::vector<ExecResult>& results,
                     const std::vector<RecordedRun>& recorded);

}  // namespace remat
