// remat-studio: opens on the built-in demo (chain:16 with store-all,
// recompute-all and sqrt), or on the model given as the first argument; the
// options set what it shows first (widgets/views/window_start.h). Hidden
// option --screenshot FILE: save a grab of the window once it shows what the
// options asked for, and quit (README pictures, headless checks).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>

#include "widgets/views/main_window.h"
#include "widgets/views/window_start.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Remat");
  QApplication::setApplicationName("Remat Studio");
  QCommandLineParser cli;
  remat::add_start_options(cli);
  cli.process(app);
  remat::StartOptions options;
  if (QString error; !remat::read_start_options(cli, options, error)) {
    std::fprintf(stderr, "remat-studio: %s\n", qPrintable(error));
    return 2;
  }

  remat::MainWindow w;
  auto* start = new remat::WindowStart(&w, options);
  QObject::connect(start, &remat::WindowStart::notice, [](const QString& m) {
    std::fprintf(stderr, "remat-studio: %s\n", qPrintable(m));
  });
  QObject::connect(start, &remat::WindowStart::finished, &app, [&app](int code) { app.exit(code); });
  start->start();
  return app.exec();
}
