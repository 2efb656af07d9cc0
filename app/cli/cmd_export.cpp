// remat export: the memory timeline and the graph at a step as PNG or SVG,
// rendered headless by the same code as the window (widgets/exporter.h), in
// the picture module that only this command and sweep --plot open
// (render_module.h). Built only with the GUI; cmd_export_nogui.cpp stands in
// otherwise.
#include <iostream>
#include <memory>

#include "app/cli/commands.h"
#include "app/cli/render_module.h"
#include "app/cli/export_snapshot.h"
#include "core/errors.h"
#include "core/exec/executor.h"
#include "core/model_source.h"
#include "core/strategies/registry.h"

namespace remat::cli {
namespace {

struct ExportOptions {
  std::string model;
  std::string strategies = "store-all,recompute-all,sqrt";
  std::string timeline, graph, csv, json;
  std::string size = "1200x600";
  double scale = 1;
  long long step = 0;
  bool stepSet = false;
  InstructionLimit limit;
  SnapshotExportOptions snapshot;
};

void run_export(const ExportOptions& o) {
  if (o.timeline.empty() && o.graph.empty() && o.csv.empty() && o.json.empty() && o.snapshot.path.empty())
    throw InputError("nothing to export: give --timeline, --graph, --csv, --json or --memory-snapshot");
  check_snapshot_export(o.snapshot);
  // Check every argument before any work or any file.
  const ExportFiles files{o.timeline, o.graph, o.csv, o.json, o.size, o.scale, o.step};
  const bool pictures = !(o.timeline.empty() && o.graph.empty() && o.csv.empty() && o.json.empty());
  const RenderModule* render = pictures ? &render_module() : nullptr;  // a snapshot alone needs no Qt
  if (render) render->check_export(files);
  if (o.stepSet && o.graph.empty()) throw InputError("--step needs --graph");
  const auto specs = split_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(spec);
  const Model model = load_model(o.model);
  const auto runs = simulate_strategies(model, specs, {.limit = o.limit});
  for (const auto& r : runs)
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
  if (o.snapshot.measured) check_executable(model);  // before any file is written

  // The snapshot first: it needs no Qt (nor the picture module), and
  // --measured (a run) is what can still fail.
  if (!o.snapshot.path.empty()) export_memory_snapshot(model, runs.front(), o.snapshot);
  if (render) render->write_export(model, runs, files, std::cout);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand("export", "Export the memory timeline and the graph at a step as PNG/SVG (and data)");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16) or a .json/.onnx file")->required();
  cmd->add_option("-s,--strategy", o->strategies, "Comma-separated strategies (the graph shows the first)")
      ->capture_default_str();
  cmd->add_option("--timeline", o->timeline, "Write the memory timeline to this .png or .svg");
  cmd->add_option("--graph", o->graph, "Write the graph at --step to this .png or .svg");
  auto* step = cmd->add_option("--step", o->step, "Step (instruction index, from 0) shown by --graph");
  cmd->add_option("--size", o->size, "Picture size WIDTHxHEIGHT in logical pixels (the SVG viewBox)")
      ->capture_default_str();
  cmd->add_option("--scale", o->scale, "PNG device pixel ratio (2: twice the pixels, for HiDPI)")->capture_default_str();
  cmd->add_option("--csv", o->csv, "Also write the timelines as CSV");
  cmd->add_option("--json", o->json, "Also write the comparison as JSON");
  add_max_instructions_option(cmd, o->limit);
  add_snapshot_export_options(cmd, o->snapshot);
  cmd->callback([o, step] {
    o->stepSet = step->count() > 0;
    run_export(*o);
  });
}

}  // namespace remat::cli
