// remat export: the memory timeline and the graph at a step as PNG or SVG, and
// the animation of one to three strategies side by side as GIF/MP4/WebM,
// rendered headless by the same code as the window (widgets/export/exporter.h,
// widgets/export/animation_export.h), in the picture module that only this command
// and sweep --plot open (render_module.h). Built only with the GUI;
// cmd_export_nogui.cpp stands in otherwise.
#include <iostream>
#include <memory>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/render_module.h"
#include "app/cli/export_snapshot.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/exec/executor.h"
#include "core/io/model_source.h"
#include "core/io/torch_plan.h"
#include "core/strategies/registry.h"

namespace remat::cli {
namespace {

struct ExportOptions {
  std::string model;
  std::string strategies = "store-all,recompute-all,sqrt";
  ExportFiles files;  // the paths and the pictures' options, as the module takes them
  bool stepSet = false;
  InstructionLimit limit;
  SnapshotExportOptions snapshot;
  std::string torchPlan;
};

void run_export(const ExportOptions& o) {
  const ExportFiles& f = o.files;
  const bool pictures = !(f.timeline.empty() && f.graph.empty() && f.csv.empty() && f.json.empty() && f.animation.empty());
  if (!pictures && o.snapshot.path.empty() && o.torchPlan.empty())
    throw InputError(
        "nothing to export: give --timeline, --graph, --animation, --csv, --json, --memory-snapshot or --torch-plan");
  // Check every argument before any work or any file.
  check_snapshot_export(o.snapshot);
  if (!o.torchPlan.empty()) check_torch_plan_path(o.torchPlan);
  if (!(f.scale > 0 && f.scale <= 8)) throw InputError("--scale must be in (0, 8]");
  if (!(f.fontScale >= 0.5 && f.fontScale <= 4)) throw InputError("--font-scale must be in [0.5, 4]");
  const RenderModule* render = pictures ? &render_module() : nullptr;  // a snapshot alone needs no Qt
  if (render) render->check_export(f);
  if (o.stepSet && f.graph.empty()) throw InputError("--step needs --graph");
  const auto specs = expand_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(resolve_budget_shares(spec, 0));
  if (!f.animation.empty() && specs.size() > 3)
    throw InputError("--animation shows 1 to 3 strategies side by side; --strategy lists " +
                     std::to_string(specs.size()));
  const Model model = load_model(o.model);
  const auto runs = simulate_strategies(model, resolve_budget_shares(model, specs), {.limit = o.limit});
  for (const auto& r : runs)
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
  if (o.snapshot.measured) check_executable(model);  // before any file is written
  // Made before any file: a model that was not captured is refused here.
  const std::optional<TorchPlan> plan =
      o.torchPlan.empty() ? std::nullopt : std::optional<TorchPlan>(make_torch_plan(model, runs.front()));

  // The snapshot first: it needs no Qt (nor the picture module), and
  // --measured (a run) is what can still fail.
  if (!o.snapshot.path.empty()) export_memory_snapshot(model, runs.front(), o.snapshot);
  if (plan) {
    write_torch_plan(model, *plan, o.torchPlan);
    std::cout << "wrote " << o.torchPlan << " (" << plan->strategy << ", " << plan->kind << " plan)\n";
  }
  if (render) render->write_export(model, runs, f, std::cout);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export", "Export the memory timeline and the graph at a step as PNG/SVG, an animation as GIF/MP4/WebM (and data)");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16) or a .json/.onnx file")->required();
  cmd->add_option("-s,--strategy", o->strategies, "Comma-separated strategies, 'all' among them for every one that takes no argument (the graph shows the first)")
      ->capture_default_str();
  cmd->add_option("--timeline", o->files.timeline, "Write the memory timeline to this .png or .svg");
  cmd->add_option("--graph", o->files.graph, "Write the graph at --step to this .png or .svg");
  auto* step = cmd->add_option("--step", o->files.step, "Step (instruction index, from 0) shown by --graph");
  auto* size = cmd->add_option("--size", o->files.size,
                               "Picture size WIDTHxHEIGHT in logical pixels (the SVG viewBox; an animation's frames "
                               "default to 1280x720)")
                   ->capture_default_str();
  auto* scale = cmd->add_option("--scale", o->files.scale,
                                "Pixels per logical pixel of PNGs (2: twice the pixels, for slides and HiDPI) and "
                                "animations (default 1)")
                    ->capture_default_str();
  auto* fontScale = cmd->add_option("--font-scale", o->files.fontScale,
                                    "Text size relative to the window's (pictures 1.5, animations 1.2: readable on slides)")
                        ->capture_default_str();
  cmd->add_option("--animation", o->files.animation,
                  "Write the graph through every step of the strategies (1 to 3, side by side on one phase axis) "
                  "to this .gif, .mp4 or .webm");
  cmd->add_option("--fps", o->files.fps, "Animation frames per second")->capture_default_str();
  cmd->add_flag("--with-chart", o->files.withChart, "Animation: the memory timeline under the graph, its cursor following");
  cmd->add_flag("--hide-frees", o->files.hideFrees,
                "Animation: one frame per fwd/bwd step (free instructions skipped; the default unless --every-step)");
  cmd->add_flag("--every-step", o->files.everyStep,
                "Animation: one frame per instruction of the longest strategy (the default: one per fwd/bwd step of "
                "the shortest, the others at the same phase, a caption per frame)");
  cmd->add_option("--max-frames", o->files.maxFrames, "Animation: longer schedules are sampled evenly to this many frames")
      ->capture_default_str();
  cmd->add_option("--csv", o->files.csv, "Also write the timelines as CSV");
  cmd->add_option("--json", o->files.json, "Also write the comparison as JSON");
  add_max_instructions_option(cmd, o->limit);
  add_snapshot_export_options(cmd, o->snapshot);
  cmd->add_option("--torch-plan", o->torchPlan,
                  "Write the first strategy as a PyTorch plan (.json) for remat_capture.apply: which captured ops' "
                  "outputs PyTorch keeps and which it recomputes (models captured by remat_capture only)");
  cmd->callback([o, step, size, scale, fontScale] {
    o->files.fontScaleSet = fontScale->count() > 0;
    o->stepSet = step->count() > 0;
    o->files.sizeSet = size->count() > 0;
    o->files.scaleSet = scale->count() > 0;
    run_export(*o);
  });
}

}  // namespace remat::cli
