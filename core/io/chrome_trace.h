// `remat run --trace`: the executed schedules as a Chrome / Perfetto trace
// (the Trace Event Format's JSON object form, {"traceEvents": [...]}): one
// process per strategy, a complete ("X") slice per instruction with its op,
// kinds, recompute flag and measured time, and two counter ("C") tracks,
// resident bytes as predicted and as measured (docs/pytorch.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/comparison.h"
#include "core/exec/executor.h"
#include "core/io/run_recorder.h"

namespace remat {

struct TracedStrategy {
  const StrategyRun* sim = nullptr;
  const ExecResult* exec = nullptr;
  const RecordedRun* recorded = nullptr;  // may be null: no measured counter
};

nlohmann::json chrome_trace(const Model& model, const std::string& backend, const std::vector<TracedStrategy>& runs);

}  // namespace remat
