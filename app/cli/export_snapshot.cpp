#include "app/cli/export_snapshot.h"

#include <iostream>

#include "app/cli/backend_choice.h"
#include "app/cli/commands.h"
#include "core/base/errors.h"
#include "core/exec/executor.h"
#include "core/io/run_recorder.h"
#include "core/io/torch_snapshot.h"

namespace remat::cli {

void add_snapshot_export_options(CLI::App* cmd, SnapshotExportOptions& o) {
  cmd->add_option("--memory-snapshot", o.path,
                  "Write the first strategy's allocation trace as a PyTorch memory snapshot (.pickle for "
                  "pytorch.org/memory_viz and torch.cuda._memory_viz, or .json)");
  cmd->add_flag("--measured", o.measured,
                "With --memory-snapshot: run the strategy once on --backend and write what the executor allocated, "
                "with measured times (executable models only)");
  cmd->add_option("--backend", o.backend, "With --measured: auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--seed", o.seed, "With --measured: seed of the input, parameters and dropout masks")->capture_default_str();
}

void check_snapshot_export(const SnapshotExportOptions& o) {
  if (o.path.empty()) {
    if (o.measured) throw InputError("--measured needs --memory-snapshot");
    return;
  }
  check_snapshot_path(o.path);
  (void)parse_backend_kind(o.backend);
  if (o.seed >= (uint64_t{1} << 32)) throw InputError("--seed must be below 2^32 (4294967296)");
}

void export_memory_snapshot(const Model& model, const StrategyRun& run, const SnapshotExportOptions& o) {
  const auto simulated = simulated_allocations(model, run.schedule);
  nlohmann::json snap;
  if (!o.measured) {
    snap = make_torch_snapshot(simulated, run.name + " (predicted)");
  } else {
    check_executable(model);
    auto backend = make_backend(parse_backend_kind(o.backend), std::cerr);
    RunRecorder recorder(*backend);
    ExecOptions eo;
    eo.seed = o.seed;
    eo.repeat = 1;
    const ExecResult res = execute(model, run.schedule, recorder, eo);
    if (!res.ok()) throw Failure("--measured: strategy '" + run.name + "' did not run: " + res.message);
    auto events = recorder.strategies().back().events;
    label_measured(events, simulated);
    snap = make_torch_snapshot(events, run.name + " (measured on " + backend->name() + ")");
  }
  write_torch_snapshot(snap, o.path);
  std::cout << "wrote " << o.path << " (" << run.name << ", " << (o.measured ? "measured" : "predicted") << ", "
            << snap["device_traces"][0].size() << " trace entries)\n";
}

}  // namespace remat::cli
