// `remat export --memory-snapshot FILE`: the allocation trace of a strategy in
// PyTorch's memory snapshot format, predicted (the simulator's) or, with
// --measured, as the executor allocated it in a real run. Shared by the GUI
// build's export command and the one without the GUI (the snapshot needs no Qt).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "core/analysis/comparison.h"

namespace remat::cli {

struct SnapshotExportOptions {
  std::string path;
  bool measured = false;
  std::string backend = "auto";
  uint64_t seed = 1;
};

void add_snapshot_export_options(CLI::App* cmd, SnapshotExportOptions& o);
// Checks the flags before any work.
void check_snapshot_export(const SnapshotExportOptions& o);
// Writes the snapshot of `run` (a simulated strategy of `model`) and says so on stdout.
void export_memory_snapshot(const Model& model, const StrategyRun& run, const SnapshotExportOptions& o);

}  // namespace remat::cli
