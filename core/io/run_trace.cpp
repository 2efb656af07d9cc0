#include "core/io/run_trace.h"


#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "core/io/chrome_trace.h"

namespace remat {

void check_trace_path(const std::string& path) { check_output_path("--trace", path, ".json", "the trace is JSON"); }

void write_run_trace(const std::string& path, const Model& model, const std::string& backend,
                     const std::vector<StrategyRun>& sims, const std::vector<ExecResult>& results,
                     const std::vector<RecordedRun>& recorded) {
  // The executor calls begin_strategy() once per strategy it starts; one that
  // never started (the baseline did not fit) has no recording.
  std::vector<TracedStrategy> runs;
  for (std::size_t i = 0; i < sims.size() && i < results.size(); ++i)
    runs.push_back({&sims[i], &results[i], i < recorded.size() && recorded.size() == results.size() ? &recorded[i] : nullptr});
  const auto trace = chrome_trace(model, backend, runs);
  write_file_atomically(path, [&](std::ostream& out) { out << trace.dump() << "\n"; });
}

}  // namespace remat
