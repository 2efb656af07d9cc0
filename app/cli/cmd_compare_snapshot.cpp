// remat compare-snapshot: a PyTorch memory snapshot recorded on a GPU
// (torch.cuda.memory._record_memory_history + _dump_snapshot) against remat's
// prediction for the same model and strategy: the curves aligned on the
// forward and backward passes, the peaks, and what explains the difference.
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/cli/commands.h"
#include "core/analysis/comparison.h"
#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "core/io/snapshot_compare.h"
#include "core/io/model_source.h"
#include "core/strategies/registry.h"

namespace remat::cli {
namespace {

struct CompareOptions {
  std::string model, strategy = "store-all", snapshot, svg;
  int device = -1;
  bool json = false;
};

void run_compare(const CompareOptions& o) {
  if (split_strategy_list(o.strategy).size() != 1) throw InputError("--strategy: give one strategy");
  (void)make_strategy(resolve_budget_shares(o.strategy, 0));
  if (!o.svg.empty()) check_output_path("--svg", o.svg, ".svg", "the picture is SVG");
  const Model model = load_model(o.model);
  const auto runs = simulate_strategies(model, resolve_budget_shares(model, {o.strategy}));
  if (!runs[0].ok()) throw InputError("strategy '" + o.strategy + "': " + runs[0].error);
  const auto snap = load_torch_snapshot(o.snapshot);
  const auto curve = snapshot_curve(snap, "snapshot '" + o.snapshot + "'", o.device);
  if (curve.active.empty()) throw InputError("snapshot '" + o.snapshot + "': the trace has no alloc or free_completed entries");
  const auto cmp = compare_snapshot(model, runs[0], curve);
  if (!o.svg.empty())
    write_file_atomically(o.svg, [&](std::ostream& out) {
      out << snapshot_comparison_svg(cmp, model.name + ": " + o.snapshot + " against " + runs[0].name);
    });
  if (o.json) {
    std::cout << snapshot_comparison_json(cmp).dump() << "\n";
    return;
  }
  std::printf("model %s, strategy %s; snapshot %s\n", model.name.c_str(), runs[0].name.c_str(), o.snapshot.c_str());
  std::printf("%-34s %14s %14s\n", "", "predicted", "recorded");
  std::printf("%-34s %14s %14s\n", "peak (above the recording's start)", format_bytes(cmp.predicted_peak).c_str(),
              format_bytes(cmp.measured_peak).c_str());
  std::printf("%-34s %14zu %14zu\n", "points (instructions / events)", cmp.predicted.size(), cmp.measured.size());
  for (const auto& line : cmp.explanation) std::printf("- %s\n", line.c_str());
  if (!o.svg.empty()) std::printf("wrote %s\n", o.svg.c_str());
}

}  // namespace

void add_compare_snapshot_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand(
      "compare-snapshot", "Hold a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) against the prediction");
  cmd->add_option("snapshot", o->snapshot, "The snapshot: .pickle as _dump_snapshot writes it, or the same as .json")->required();
  cmd->add_option("-m,--model", o->model, "The model that was recorded: a preset spec or a .json/.onnx file")->required();
  cmd->add_option("-s,--strategy", o->strategy, "The strategy the recorded step used (store-all: plain PyTorch)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "Device of the snapshot to read (default: the first with trace entries)");
  cmd->add_option("--svg", o->svg, "Draw both curves, aligned on the forward and backward passes, into this SVG");
  cmd->add_flag("--json", o->json, "Print the comparison as JSON (both curves, peaks, explanation)");
  cmd->callback([o] { run_compare(*o); });
}

}  // namespace remat::cli
