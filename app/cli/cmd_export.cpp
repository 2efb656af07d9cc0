// remat export: the memory timeline and the graph at a step as PNG or SVG, and
// the animation of one to three strategies side by side as GIF/MP4/WebM,
// rendered headless by the same code as the window (widgets/exporter.h,
// widgets/animation_export.h).
// Built only with the GUI; cmd_export_nogui.cpp stands in otherwise.
#include <QApplication>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/cli/commands.h"
#include "core/errors.h"
#include "core/model_source.h"
#include "core/strategy.h"
#include "widgets/animation_export.h"
#include "widgets/exporter.h"

namespace remat::cli {
namespace {

struct ExportOptions {
  std::string model;
  std::string strategies = "store-all,recompute-all,sqrt";
  std::string timeline, graph, csv, json, animation;
  std::string size = "1200x600";
  double scale = 2;        // pictures: twice the pixels (slides, HiDPI)
  bool scaleSet = false;
  double fontScale = 1.5;  // text sized for slides
  long long step = 0;
  bool stepSet = false;
  double fps = 8;
  bool withChart = false, hideFrees = false, sizeSet = false, fontScaleSet = false;
  int maxFrames = 1500;
};

void run_export(const ExportOptions& o) {
  if (o.timeline.empty() && o.graph.empty() && o.csv.empty() && o.json.empty() && o.animation.empty())
    throw InputError("nothing to export: give --timeline, --graph, --animation, --csv or --json");
  // Check every argument before any work or any file.
  if (!o.timeline.empty()) (void)image_format_of(o.timeline);
  if (!o.graph.empty()) (void)image_format_of(o.graph);
  if (!o.animation.empty()) (void)animation_format_of(o.animation);
  const QSize size = parse_size(o.size);
  if (o.stepSet && o.graph.empty()) throw InputError("--step needs --graph");
  if (!(o.scale > 0 && o.scale <= 8)) throw InputError("--scale must be in (0, 8]");
  if (!(o.fontScale >= 0.5 && o.fontScale <= 4)) throw InputError("--font-scale must be in [0.5, 4]");
  const auto specs = split_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(spec);
  if (!o.animation.empty() && specs.size() > 3)
    throw InputError("--animation shows 1 to 3 strategies side by side; --strategy lists " +
                     std::to_string(specs.size()));
  const Model model = load_model(o.model);
  const auto runs = simulate_strategies(model, specs);
  for (const auto& r : runs)
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);

  // Charts need a QApplication; without a display, render offscreen.
  if (!std::getenv("QT_QPA_PLATFORM") && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  static int argc = 1;
  static char name[] = "remat";
  static char* argv[] = {name, nullptr};
  // Qt's platform chatter (offscreen plugin, runtime dir) is not for the CLI's user.
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
    if (type == QtCriticalMsg || type == QtFatalMsg) std::cerr << "remat: qt: " << msg.toStdString() << "\n";
  });
  std::unique_ptr<QApplication> app;
  if (!QCoreApplication::instance()) app = std::make_unique<QApplication>(argc, argv);

  if (!o.timeline.empty()) {
    TimelineExport t;
    t.size = size;
    t.devicePixelRatio = o.scale;
    t.fontScale = o.fontScale;
    t.title = QString::fromStdString(model.name);
    export_timeline(runs, o.timeline, t);
    std::cout << "wrote " << o.timeline << "\n";
  }
  if (!o.graph.empty()) {
    const StrategyRun& r = runs.front();
    if (o.step < 0) throw InputError("--step must be >= 0");
    export_graph(model, r, std::size_t(o.step), o.graph, size, o.scale, o.fontScale);
    std::cout << "wrote " << o.graph << " (" << r.name << ", step " << o.step << ")\n";
  }
  if (!o.animation.empty()) {
    AnimationOptions a;
    a.size = o.sizeSet ? size : AnimationOptions{}.size;
    a.scale = o.scaleSet ? o.scale : 1;  // GIFs are big: one pixel per pixel unless asked
    a.fps = o.fps;
    if (o.fontScaleSet) a.fontScale = o.fontScale;
    a.withChart = o.withChart;
    a.hideFrees = o.hideFrees;
    a.maxFrames = o.maxFrames;
    std::vector<const StrategyRun*> shown;
    for (const auto& r : runs) shown.push_back(&r);
    ChartBackdrop backdrop;
    if (a.withChart)
      backdrop = render_chart_backdrop(shown, chart_band(a.size, true).size().toSize(), a.scale, a.fontScale,
                                       QString::fromStdString(model.name));
    const int frames = export_animation(model, shown, o.animation, a, backdrop);
    std::cout << "wrote " << o.animation << " (" << frames << " frames at " << o.fps << " fps)\n";
  }
  if (!o.csv.empty()) {
    export_csv(model, runs, o.csv);
    std::cout << "wrote " << o.csv << "\n";
  }
  if (!o.json.empty()) {
    export_json(model, runs, o.json);
    std::cout << "wrote " << o.json << "\n";
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export", "Export the memory timeline and the graph at a step as PNG/SVG, an animation as GIF/MP4/WebM (and data)");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16) or a .json/.onnx file")->required();
  cmd->add_option("-s,--strategy", o->strategies, "Comma-separated strategies (the graph shows the first)")
      ->capture_default_str();
  cmd->add_option("--timeline", o->timeline, "Write the memory timeline to this .png or .svg");
  cmd->add_option("--graph", o->graph, "Write the graph at --step to this .png or .svg");
  auto* step = cmd->add_option("--step", o->step, "Step (instruction index, from 0) shown by --graph");
  auto* size = cmd->add_option("--size", o->size,
                               "Picture size WIDTHxHEIGHT in logical pixels (the SVG viewBox; an animation's frames "
                               "default to 1280x720)")
                   ->capture_default_str();
  auto* scale = cmd->add_option("--scale", o->scale,
                                "Pixels per logical pixel of PNGs (2: twice the pixels, for slides and HiDPI) and "
                                "animations (default 1)")
                    ->capture_default_str();
  auto* fontScale = cmd->add_option("--font-scale", o->fontScale,
                                    "Text size relative to the window's (pictures 1.5, animations 1.2: readable on slides)")
                        ->capture_default_str();
  cmd->add_option("--animation", o->animation,
                  "Write the graph through every step of the strategies (1 to 3, side by side on one phase axis) "
                  "to this .gif, .mp4 or .webm");
  cmd->add_option("--fps", o->fps, "Animation frames per second")->capture_default_str();
  cmd->add_flag("--with-chart", o->withChart, "Animation: the memory timeline under the graph, its cursor following");
  cmd->add_flag("--hide-frees", o->hideFrees, "Animation: one frame per fwd/bwd step (free instructions skipped)");
  cmd->add_option("--max-frames", o->maxFrames, "Animation: longer schedules are sampled evenly to this many frames")
      ->capture_default_str();
  cmd->add_option("--csv", o->csv, "Also write the timelines as CSV");
  cmd->add_option("--json", o->json, "Also write the comparison as JSON");
  cmd->callback([o, step, size, scale, fontScale] {
    o->fontScaleSet = fontScale->count() > 0;
    o->stepSet = step->count() > 0;
    o->sizeSet = size->count() > 0;
    o->scaleSet = scale->count() > 0;
    run_export(*o);
  });
}

}  // namespace remat::cli
