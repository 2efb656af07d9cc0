// libremat_render.so: the pictures of `remat export` and `remat sweep --plot`,
// drawn headless by the window's own widgets (widgets/export/exporter.h,
// widgets/export/animation_export.h, widgets/views/tradeoff_chart.h). remat opens it only for those (render_module.h),
// so that no other command loads Qt.
#include <QApplication>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/cli/render_module.h"
#include "core/base/errors.h"
#include "widgets/export/animation_export.h"
#include "widgets/export/exporter.h"
#include "widgets/views/tradeoff_chart.h"

namespace remat::cli {
namespace {

// Charts need a QApplication, for the call (none is made when the process
// has one); without a display they render offscreen. Qt's platform chatter
// (offscreen plugin, runtime dir) is not for the CLI's user.
class Application {
 public:
  Application() {
    if (QCoreApplication::instance()) return;
    if (!std::getenv("QT_QPA_PLATFORM") && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
      setenv("QT_QPA_PLATFORM", "offscreen", 1);
    static int argc = 1;
    static char name[] = "remat";
    static char* argv[] = {name, nullptr};
    qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
      if (type == QtCriticalMsg || type == QtFatalMsg) std::cerr << "remat: qt: " << msg.toStdString() << "\n";
    });
    app_ = std::make_unique<QApplication>(argc, argv);
  }

 private:
  std::unique_ptr<QApplication> app_;
};

// The animation's own defaults for what the user did not give.
AnimationOptions animation_options(const ExportFiles& f) {
  AnimationOptions a = f.everyStep ? AnimationOptions{} : lecture_animation_options();
  if (f.sizeSet) a.size = parse_size(f.size);
  if (f.scaleSet) a.scale = f.scale;  // GIFs are big: one pixel per pixel unless asked
  if (f.fontScaleSet) a.fontScale = f.fontScale;
  a.fps = f.fps;
  a.withChart = f.withChart;
  a.hideFrees = f.hideFrees || !f.everyStep;
  a.maxFrames = f.maxFrames;
  return a;
}

void check_export(const ExportFiles& f) {
  if (!f.timeline.empty()) (void)image_format_of(f.timeline);
  if (!f.graph.empty()) (void)image_format_of(f.graph);
  (void)parse_size(f.size);
  if (!f.animation.empty()) (void)check_animation(f.animation, animation_options(f));
}

void write_export(const Model& model, const std::vector<StrategyRun>& runs, const ExportFiles& f, std::ostream& out) {
  const QSize size = parse_size(f.size);
  const Application app;
  if (!f.timeline.empty()) {
    TimelineExport t;
    t.size = size;
    t.devicePixelRatio = f.scale;
    t.fontScale = f.fontScale;
    t.title = QString::fromStdString(model.name);
    export_timeline(runs, f.timeline, t);
    out << "wrote " << f.timeline << "\n";
  }
  if (!f.graph.empty()) {
    const StrategyRun& r = runs.front();
    if (f.step < 0) throw InputError("--step must be >= 0");
    export_graph(model, r, std::size_t(f.step), f.graph, size, f.scale, f.fontScale);
    out << "wrote " << f.graph << " (" << r.name << ", step " << f.step << ")\n";
  }
  if (!f.animation.empty()) {
    const AnimationOptions a = animation_options(f);
    std::vector<const StrategyRun*> shown;
    for (const auto& r : runs) shown.push_back(&r);
    ChartBackdrop backdrop;
    if (a.withChart)
      backdrop = render_chart_backdrop(shown, chart_band(a.size, true).size().toSize(), a.scale, a.fontScale,
                                       QString::fromStdString(model.name), true);  // each on its own length
    const int frames = export_animation(model, shown, f.animation, a, backdrop);
    out << "wrote " << f.animation << " (" << frames << " frames at " << f.fps << " fps)\n";
  }
  if (!f.csv.empty()) {
    export_csv(model, runs, f.csv);
    out << "wrote " << f.csv << "\n";
  }
  if (!f.json.empty()) {
    export_json(model, runs, f.json);
    out << "wrote " << f.json << "\n";
  }
}

void write_plot(const Model& model, const SweepResult& sweep, const std::string& path, std::ostream& out) {
  const Application app;
  TradeoffChart chart;
  chart.setSweep(QString::fromStdString(model.name), sweep);
  chart.resize(1000, 600);
  save_tradeoff_chart(chart, path);
  out << "wrote " << path << "\n";
}

constexpr RenderModule kModule{check_export, write_export, write_plot};

}  // namespace
}  // namespace remat::cli

extern "C" __attribute__((visibility("default"))) const remat::cli::RenderModule* remat_render_module(const char* abi) {
  return abi && remat::cli::render_module_abi() == abi ? &remat::cli::kModule : nullptr;
}
