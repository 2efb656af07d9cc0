// remat-studio's command line: what the window shows first, and the
// screenshot taken of it (--screenshot, for README pictures and headless
// checks). The model, the compared strategies, the size, the tab, hidden
// frees, side by side and presentation mode apply at once. What needs the
// strategies' runs waits for them: the strategy shown (--show), the step
// (--step), the op found (--find) and the Run (--run). On a model larger
// than StudioDocument::kInlineOps, and for every search, the runs are
// computed in the background; a step set before its run exists was lost (the
// window opened at step 1), and a Run started then measured nothing. The
// screenshot is grabbed once all of that is done (and the Run measured, and
// the trade-off's sweep drawn, when they were asked for).
#pragma once
#include <QObject>
#include <QSize>
#include <QString>
#include <cstddef>
#include <optional>

class QCommandLineParser;

namespace remat {
class MainWindow;

struct StartOptions {
  QString model;                      // a preset spec or a file; empty: the one saved
  std::optional<QString> strategies;  // --strategies SPECS: compared instead of the saved ones
  std::optional<QString> show;        // --show NAME: compared too, and shown in the graph
  std::optional<std::size_t> step;    // --step K, 1 the first (as the caption counts)
  std::optional<int> tab;             // --tab N
  std::optional<QSize> size;          // --size WxH
  bool sideBySide = false, hideFrees = false, present = false, run = false;
  QString find;                       // --find TEXT
  QString screenshot;                 // --screenshot FILE
};

// Registers remat-studio's options and its positional argument on `cli`.
void add_start_options(QCommandLineParser& cli);
// Reads them once `cli` has parsed the arguments. A value that cannot be one
// (--step 0, --size 800, --show with a spec that does not parse) gives false
// and `error`, one line naming the option and the value.
bool read_start_options(const QCommandLineParser& cli, StartOptions& out, QString& error);

// Applies StartOptions to a window, in two stages: start() does what needs no
// run and shows the window; once the document computes nothing more (at once
// on a small model), the rest follows and `settled` is emitted.
class WindowStart : public QObject {
  Q_OBJECT
 public:
  WindowStart(MainWindow* window, StartOptions options);
  void start();
  bool isSettled() const { return settled_; }

 signals:
  // An option that could only be half done: a step past the end (clamped to
  // the last), a --show whose run failed, a --run on a model that cannot
  // run. Also shown in the status bar.
  void notice(const QString& message);
  // Every option applied, the runs they need made.
  void settled();
  // --screenshot: written (0) or not (1); the model did not open (2: the
  // message came as a notice, and nothing was written).
  void finished(int exitCode);

 private:
  void applyRunDependent();
  void settleWhenIdle();
  bool busy() const;
  void say(const QString& message);
  MainWindow* w_;
  StartOptions o_;
  bool applied_ = false;
  bool settled_ = false;
};

}  // namespace remat
