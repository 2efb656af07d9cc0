// remat export: the memory timeline and the graph at a step as PNG or SVG,
// rendered headless by the same code as the window (widgets/exporter.h).
// Built only with the GUI; cmd_export_nogui.cpp stands in otherwise.
#include <QApplication>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/cli/commands.h"
#include "app/cli/export_snapshot.h"
#include "core/errors.h"
#include "core/exec/executor.h"
#include "core/model_source.h"
#include "core/strategy.h"
#include "widgets/exporter.h"

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
  SnapshotExportOptions snapshot;
};

void run_export(const ExportOptions& o) {
  if (o.timeline.empty() && o.graph.empty() && o.csv.empty() && o.json.empty() && o.snapshot.path.empty())
    throw InputError("nothing to export: give --timeline, --graph, --csv, --json or --memory-snapshot");
  check_snapshot_export(o.snapshot);
  // Check every argument before any work or any file.
  if (!o.timeline.empty()) (void)image_format_of(o.timeline);
  if (!o.graph.empty()) (void)image_format_of(o.graph);
  const QSize size = parse_size(o.size);
  if (o.stepSet && o.graph.empty()) throw InputError("--step needs --graph");
  const auto specs = split_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(spec);
  const Model model = load_model(o.model);
  const auto runs = simulate_strategies(model, specs);
  for (const auto& r : runs)
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
  if (o.snapshot.measured) check_executable(model);  // before any file is written

  // The snapshot first: it needs no Qt, and --measured (a run) is what can still fail.
  if (!o.snapshot.path.empty()) export_memory_snapshot(model, runs.front(), o.snapshot);
  if (o.timeline.empty() && o.graph.empty() && o.csv.empty() && o.json.empty()) return;

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
    t.title = QString::fromStdString(model.name);
    export_timeline(runs, o.timeline, t);
    std::cout << "wrote " << o.timeline << "\n";
  }
  if (!o.graph.empty()) {
    const StrategyRun& r = runs.front();
    if (o.step < 0) throw InputError("--step must be >= 0");
    export_graph(model, r, std::size_t(o.step), o.graph, size, o.scale);
    std::cout << "wrote " << o.graph << " (" << r.name << ", step " << o.step << ")\n";
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
  add_snapshot_export_options(cmd, o->snapshot);
  cmd->callback([o, step] {
    o->stepSet = step->count() > 0;
    run_export(*o);
  });
}

}  // namespace remat::cli
