#include "widgets/views/window_start.h"

#include <QCommandLineParser>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/strategies/registry.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/controllers/sweep_controller.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/main_window.h"

namespace remat {

void add_start_options(QCommandLineParser& cli) {
  cli.setApplicationDescription("Remat Studio: gradient checkpointing, step by step");
  cli.addHelpOption();
  cli.addPositionalArgument("model", "A preset spec (chain:16) or a .json/.onnx file");
  QCommandLineOption shot("screenshot", "Save a grab of the window to FILE and quit.", "FILE");
  shot.setFlags(QCommandLineOption::HiddenFromHelp);
  QCommandLineOption present("present", "Start in presentation mode (F5).");
  QCommandLineOption find("find", "Find the op named TEXT (Ctrl+F) and show it in the graph.", "TEXT");
  QCommandLineOption size("size", "Window size WIDTHxHEIGHT.", "WxH");
  QCommandLineOption strategies("strategies", "Compare these strategies (comma-separated specs).", "SPECS");
  for (QCommandLineOption* o : {&present, &find, &size, &strategies}) {
    o->setFlags(QCommandLineOption::HiddenFromHelp);
    cli.addOption(*o);
  }
  cli.addOption({"side-by-side", "Show up to three strategies side by side."});
  cli.addOption({"hide-frees", "Count only fwd and bwd instructions as steps."});
  cli.addOption({"tab", "Open the bottom tab N (0: timeline, 1: comparison, 2: trade-off).", "N"});
  cli.addOption(shot);
  cli.addOption({"show", "Show strategy NAME in the graph (compared too).", "NAME"});
  cli.addOption({"run", "Run the strategies at start, where Run › Run on says (the GPU when one answers, else the CPU)."});
  cli.addOption({"step", "Start at step K (1 is the first, as the caption counts).", "K"});
}

namespace {

// `list` checked before the model opens: a budget share ("optimal:50%") stands
// in as 0 bytes until the model's store-all peak is known (resolved below).
std::vector<StrategyRequest> checked_requests(const QString& list) {
  std::vector<StrategyRequest> out;
  for (const std::string& t : split_strategy_list(list.toStdString())) {
    try {
      out.push_back(request_strategy(resolve_budget_shares(t, 0)));
      out.back().text = t;
    } catch (const InputError& e) {
      out.push_back({.spec = std::nullopt, .text = t, .error = e.what()});
    }
  }
  return out;
}

// The open model's: each budget share as bytes of its store-all peak.
std::vector<StrategyRequest> resolved_requests(const Model& model, const QString& list) {
  std::vector<StrategyRequest> out;
  for (const std::string& t : resolve_budget_shares(model, split_strategy_list(list.toStdString())))
    out.push_back(request_strategy(t));
  return out;
}

}  // namespace

bool read_start_options(const QCommandLineParser& cli, StartOptions& o, QString& error) {
  if (!cli.positionalArguments().isEmpty()) o.model = cli.positionalArguments().first();
  if (cli.isSet("strategies")) {
    // Refused as `remat` refuses it; the panel would only mark the row.
    for (const StrategyRequest& r : checked_requests(cli.value("strategies")))
      if (!r.ok()) {
        error = QString("--strategies %1: %2").arg(QString::fromStdString(r.text), QString::fromStdString(r.error));
        return false;
      }
    o.strategies = cli.value("strategies");
  }
  if (cli.isSet("show")) {
    // Parsed here: a name that is no strategy is refused before the window opens.
    const StrategyRequest shown = checked_requests(cli.value("show")).front();
    if (!shown.spec) {
      error = QString("--show %1: %2").arg(cli.value("show"), QString::fromStdString(shown.error));
      return false;
    }
    o.show = cli.value("show");
  }
  if (cli.isSet("step")) {
    bool ok = false;
    const qulonglong k = cli.value("step").toULongLong(&ok);
    if (!ok || k == 0) {
      error = QString("--step %1: not a step number (1 is the first)").arg(cli.value("step"));
      return false;
    }
    o.step = static_cast<std::size_t>(k);
  }
  if (cli.isSet("tab")) {
    bool ok = false;
    const int n = cli.value("tab").toInt(&ok);
    if (!ok || n < 0 || n > 2) {
      error = QString("--tab %1: not a tab (0: timeline, 1: comparison, 2: trade-off)").arg(cli.value("tab"));
      return false;
    }
    o.tab = n;
  }
  if (cli.isSet("size")) {
    const QStringList wh = cli.value("size").split('x');
    bool okW = false, okH = false;
    const int width = wh.size() == 2 ? wh[0].toInt(&okW) : 0;
    const int height = wh.size() == 2 ? wh[1].toInt(&okH) : 0;
    if (!okW || !okH || width <= 0 || height <= 0) {
      error = QString("--size %1: not WIDTHxHEIGHT (1500x950)").arg(cli.value("size"));
      return false;
    }
    o.size = QSize(width, height);
  }
  o.sideBySide = cli.isSet("side-by-side");
  o.hideFrees = cli.isSet("hide-frees");
  o.present = cli.isSet("present");
  o.run = cli.isSet("run");
  o.find = cli.value("find");
  o.screenshot = cli.value("screenshot");
  return true;
}

WindowStart::WindowStart(MainWindow* window, StartOptions options) : QObject(window), w_(window), o_(std::move(options)) {}

void WindowStart::start() {
  MainWindow& w = *w_;
  if (!o_.model.isEmpty()) {
    // A screenshot runs headless: a model that does not open is said and
    // ends it (code 2) instead of waiting on a dialog nobody sees.
    const bool headless = !o_.screenshot.isEmpty();
    QString error;
    if (!w.openModel(o_.model, headless, &error) && headless) {
      emit notice(error);
      QTimer::singleShot(0, this, [this] { emit finished(2); });  // once the event loop runs
      return;
    }
  }
  if (o_.strategies) w.setSpecs(resolved_requests(w.document()->model(), *o_.strategies));
  if (o_.size) w.resize(*o_.size);
  // Compared at once, so that its run starts computing with the others;
  // shown once it is made (applyRunDependent).
  if (o_.show) w.showStrategy(*resolved_requests(w.document()->model(), *o_.show).front().spec);
  if (o_.hideFrees) w.document()->setHideFrees(true);
  if (o_.tab) w.tabs()->setCurrentIndex(*o_.tab);
  w.show();
  if (o_.sideBySide) w.setSideBySide(true);
  if (o_.present) w.setPresentation(true);
  StudioDocument* doc = w.document();
  if (doc->computing() == 0) {
    applyRunDependent();
    return;
  }
  // Runs made in the background land one by one; the options wait for the last.
  auto* wait = new QObject(this);
  connect(doc, &StudioDocument::computingChanged, wait, [this, wait](int n) {
    if (n != 0) return;
    wait->deleteLater();
    applyRunDependent();
  });
}

void WindowStart::applyRunDependent() {
  if (applied_) return;
  applied_ = true;
  MainWindow& w = *w_;
  StudioDocument* doc = w.document();
  if (o_.show) {
    const StrategySpec spec = *resolved_requests(doc->model(), *o_.show).front().spec;
    doc->showSpec(spec);
    // A strategy that cannot be made here (a budget below what one
    // instruction needs, not applicable to the model) says why.
    const RunList runs = doc->runs();
    const auto failed = std::find_if(runs.begin(), runs.end(), [&](const StrategyRun& r) { return r.parsed == spec && !r.ok(); });
    if (failed != runs.end()) {
      const QString why = QString::fromStdString(failed->error);
      // The first run that was made, instead: which run was current when the
      // shown one failed depends on the order the background jobs ended in.
      const auto made = std::find_if(runs.begin(), runs.end(), [](const StrategyRun& r) { return r.ok(); });
      if (made != runs.end() && made->parsed) doc->showSpec(StrategySpec(*made->parsed));
      const StrategyRun* shown = doc->current();
      say(QString("--show %1: %2; showing %3")
              .arg(*o_.show, why, shown ? QString::fromStdString(shown->name) : QString("no strategy")));
    }
  }
  if (o_.step) {
    const std::size_t count = doc->shownStepCount();
    const StrategyRun* r = doc->current();
    if (count == 0 || !r) {
      say(QString("--step %1: no strategy could be made to step through").arg(*o_.step));
    } else {
      if (*o_.step > count)
        say(QString("--step %1: %2 has %3 steps; showing the last")
                .arg(*o_.step)
                .arg(QString::fromStdString(r->name))
                .arg(count));
      doc->setShownStep(std::min(*o_.step, count) - 1);
    }
  }
  // After the step: a step away from the found op would scroll the graph off it.
  if (!o_.find.isEmpty()) w.findOp(o_.find);
  if (o_.run) {
    w.startRun();
    if (!w.runner()->running()) {
      const QString why = RunController::cannotRun(doc->model());
      say(QString("--run: %1").arg(why.isEmpty() ? QString("the run could not start") : why));
    }
  }
  settleWhenIdle();
}

bool WindowStart::busy() const {
  // What a screenshot should show drawn: a Run asked for, the trade-off's sweep.
  return w_->runner()->running() || w_->sweeper()->running() || w_->document()->computing() > 0;
}

void WindowStart::settleWhenIdle() {
  if (busy()) {
    QTimer::singleShot(50, this, [this] { settleWhenIdle(); });
    return;
  }
  settled_ = true;
  emit settled();
  if (o_.screenshot.isEmpty()) return;
  // A moment for the layouts and the paints the last changes posted.
  QTimer::singleShot(300, this, [this] { emit finished(w_->grab().save(o_.screenshot) ? 0 : 1); });
}

void WindowStart::say(const QString& message) {
  w_->statusBar()->showMessage(message, 10000);
  emit notice(message);
}

}  // namespace remat
