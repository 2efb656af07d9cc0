// remat-studio: opens on the built-in demo (chain:16 with store-all,
// recompute-all and sqrt), or on the model given as the first argument.
// Hidden option --screenshot FILE: save a grab of the window and quit (README
// pictures, headless checks).
#include <QApplication>
#include <QCommandLineParser>
#include <QTabWidget>
#include <QTimer>
#include <cstdio>

#include "widgets/views/main_window.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Remat");
  QApplication::setApplicationName("Remat Studio");
  QCommandLineParser cli;
  cli.setApplicationDescription("Remat Studio: gradient checkpointing, step by step");
  cli.addHelpOption();
  cli.addPositionalArgument("model", "A preset spec (chain:16) or a .json/.onnx file");
  QCommandLineOption shot("screenshot", "Save a grab of the window to FILE and quit.", "FILE");
  shot.setFlags(QCommandLineOption::HiddenFromHelp);
  QCommandLineOption step("step", "Start at step K (1 is the first, as the caption counts).", "K");
  QCommandLineOption show("show", "Show strategy NAME in the graph (compared too).", "NAME");
  QCommandLineOption run("run", "Run the strategies at start, where Run › Run on says (the GPU when one answers, else the CPU).");
  QCommandLineOption tab("tab", "Open the bottom tab N (0: timeline, 1: comparison, 2: trade-off).", "N");
  QCommandLineOption sideBySide("side-by-side", "Show up to three strategies side by side.");
  QCommandLineOption hideFrees("hide-frees", "Count only fwd and bwd instructions as steps.");
  QCommandLineOption present("present", "Start in presentation mode (F5).");
  QCommandLineOption find("find", "Find the op named TEXT (Ctrl+F) and show it in the graph.", "TEXT");
  QCommandLineOption size("size", "Window size WIDTHxHEIGHT.", "WxH");
  QCommandLineOption strategies("strategies", "Compare these strategies (comma-separated specs).", "SPECS");
  for (QCommandLineOption* o : {&present, &find, &size, &strategies}) {
    o->setFlags(QCommandLineOption::HiddenFromHelp);
    cli.addOption(*o);
  }
  cli.addOption(sideBySide);
  cli.addOption(hideFrees);
  cli.addOption(tab);
  cli.addOption(shot);
  cli.addOption(show);
  cli.addOption(run);
  cli.addOption(step);
  cli.process(app);

  remat::MainWindow w;
  if (!cli.positionalArguments().isEmpty()) w.openModel(cli.positionalArguments().first());
  if (cli.isSet(strategies)) w.setSpecs(remat::strategy_requests(cli.value(strategies)));
  if (cli.isSet(size)) {
    const QStringList wh = cli.value(size).split('x');
    if (wh.size() == 2) w.resize(wh[0].toInt(), wh[1].toInt());
  }
  if (cli.isSet(show)) {
    // Added to the compared ones if missing.
    const remat::StrategyRequest shown = remat::request_strategy(cli.value(show).toStdString());
    if (shown.spec) w.showStrategy(*shown.spec);
    else std::fprintf(stderr, "remat-studio: --show %s: %s\n", shown.text.c_str(), shown.error.c_str());
  }
  if (cli.isSet(hideFrees)) w.document()->setHideFrees(true);
  if (cli.isSet(step)) {
    const qulonglong k = cli.value(step).toULongLong();
    w.document()->setShownStep(k > 0 ? k - 1 : 0);
  }
  if (cli.isSet(tab)) w.tabs()->setCurrentIndex(cli.value(tab).toInt());
  w.show();
  if (cli.isSet(sideBySide)) w.setSideBySide(true);
  if (cli.isSet(present)) w.setPresentation(true);
  if (cli.isSet(find)) QTimer::singleShot(300, &w, [&] { w.findOp(cli.value(find)); });
  if (cli.isSet(run)) w.startRun();
  if (cli.isSet(shot)) {
    QTimer::singleShot(cli.isSet(run) ? 3000 : 800, &w, [&] {
      const bool ok = w.grab().save(cli.value(shot));
      app.exit(ok ? 0 : 1);
    });
  }
  return app.exec();
}
