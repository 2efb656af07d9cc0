// remat-studio's command line through the code main() runs (add_start_options,
// read_start_options, WindowStart): on a model large enough that the
// strategies are computed in the background, --show and --step wait for the
// runs (the window opened at step 1 before), a step past the end is clamped
// and said, and --screenshot grabs the window only once it shows them.
#include <QCommandLineParser>
#include <QFileInfo>
#include <QImage>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/model/presets.h"
#include "core/strategies/registry.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/main_window.h"
#include "widgets/views/window_start.h"

using namespace remat;

namespace {

// The arguments as main() reads them.
StartOptions parsed(const QStringList& args) {
  QCommandLineParser cli;
  add_start_options(cli);
  EXPECT_TRUE(cli.parse(QStringList{"remat-studio"} + args)) << cli.errorText().toStdString();
  StartOptions o;
  QString error;
  EXPECT_TRUE(read_start_options(cli, o, error)) << error.toStdString();
  return o;
}

QString readError(const QStringList& args) {
  QCommandLineParser cli;
  add_start_options(cli);
  EXPECT_TRUE(cli.parse(QStringList{"remat-studio"} + args));
  StartOptions o;
  QString error;
  EXPECT_FALSE(read_start_options(cli, o, error));
  return error;
}

// chain:300 (301 ops) is above the window's inline limit: its strategies are
// computed by background jobs. dtr:40 on it: 3,376 instructions.
const QStringList kLarge = {"chain:300", "--strategies", "store-all,sqrt", "--show", "dtr:40"};

struct Started {
  MainWindow w;
  WindowStart* start;
  QStringList notices;
  explicit Started(const QStringList& args) : start(new WindowStart(&w, parsed(args))) {
    QObject::connect(start, &WindowStart::notice, [this](const QString& m) { notices << m; });
    start->start();
  }
  StudioDocument* doc() const { return w.document(); }
  // Settled, and nothing left computing (the runs are made).
  bool settle() {
    return QTest::qWaitFor([this] { return start->isSettled() && doc()->computing() == 0; }, 60000);
  }
  std::string said() const { return notices.join(" | ").toStdString(); }
};

}  // namespace

TEST(WindowStart, ALargeModelOpensAtTheStepAskedOnceItsRunsAreMade) {
  Started s(kLarge + QStringList{"--step", "1500"});
  ASSERT_GT(s.doc()->model().size(), StudioDocument::kInlineOps);
  EXPECT_GT(s.doc()->computing(), 0);  // the background path is the one taken
  EXPECT_FALSE(s.start->isSettled());
  ASSERT_TRUE(s.settle());
  EXPECT_EQ(s.doc()->computing(), 0);
  ASSERT_NE(s.doc()->current(), nullptr);
  EXPECT_EQ(s.doc()->current()->name, "dtr:40");
  EXPECT_EQ(s.doc()->shownStep(), 1499u);
  EXPECT_EQ(s.doc()->shownStepCount(), 3376u);
  EXPECT_TRUE(s.doc()->caption().startsWith("Step 1500 of 3376 (dtr:40): ")) << s.doc()->caption().toStdString();
  EXPECT_EQ(s.said(), "");
}

// Steps counted without the frees (--hide-frees): 1,388 fwd and 300 bwd.
TEST(WindowStart, TheStepCountsAsHideFreesSays) {
  Started s(kLarge + QStringList{"--hide-frees", "--step", "1000"});
  ASSERT_TRUE(s.settle());
  EXPECT_EQ(s.doc()->shownStepCount(), 1688u);
  EXPECT_EQ(s.doc()->shownStep(), 999u);
  EXPECT_TRUE(s.doc()->caption().startsWith("Step 1000 of 1688 (dtr:40): "));
}

TEST(WindowStart, AStepPastTheEndIsTheLastAndSaidSo) {
  Started s(kLarge + QStringList{"--step", "9000"});
  ASSERT_TRUE(s.settle());
  EXPECT_EQ(s.doc()->shownStep(), 3375u);
  const QString said = "--step 9000: dtr:40 has 3376 steps; showing the last";
  EXPECT_EQ(s.said(), said.toStdString());
  EXPECT_EQ(s.w.statusBar()->currentMessage().toStdString(), said.toStdString());
}

// A small model takes the same path, at once.
TEST(WindowStart, ASmallModelSettlesAtOnceTheSameWay) {
  Started s({"chain:16", "--strategies", "store-all,sqrt", "--show", "sqrt", "--step", "500"});
  EXPECT_TRUE(s.start->isSettled());
  EXPECT_EQ(s.doc()->current()->name, "sqrt");
  EXPECT_EQ(s.doc()->shownStep(), s.doc()->shownStepCount() - 1);
  EXPECT_EQ(s.said(), QString("--step 500: sqrt has %1 steps; showing the last")
                          .arg(s.doc()->shownStepCount())
                          .toStdString());
}

TEST(WindowStart, AShownStrategyThatFailsIsSaid) {
  Started s({"chain:300", "--strategies", "store-all,sqrt", "--show", "dtr:4", "--step", "7"});
  ASSERT_TRUE(s.settle());
  ASSERT_NE(s.doc()->current(), nullptr);
  EXPECT_EQ(s.doc()->current()->name, "store-all");
  EXPECT_EQ(s.doc()->shownStep(), 6u);
  ASSERT_EQ(s.notices.size(), 1) << s.said();
  EXPECT_TRUE(s.notices[0].startsWith("--show dtr:4: dtr: a budget of 4 bytes is below what")) << s.notices[0].toStdString();
  EXPECT_TRUE(s.notices[0].endsWith("; showing store-all")) << s.notices[0].toStdString();
}

// Budgets written as shares of store-all's peak, as `remat` takes them: the
// window compares and shows the strategies those bytes of the model name.
TEST(WindowStart, BudgetSharesAreOfTheModelsStoreAllPeak) {
  const uint64_t half = store_all_peak(make_preset("chain:16")) / 2;
  Started s({"chain:16", "--strategies", "store-all,optimal:50%", "--show", "dtr:50%:lru"});
  ASSERT_TRUE(s.settle());
  ASSERT_NE(s.doc()->current(), nullptr);
  EXPECT_EQ(s.doc()->current()->name, "dtr:" + std::to_string(half) + ":lru");
  QStringList names;
  for (const StrategyRequest& r : s.doc()->specs()) names << QString::fromStdString(r.text);
  EXPECT_TRUE(names.contains(QString("optimal:%1").arg(half))) << names.join(",").toStdString();
  EXPECT_EQ(s.said(), "");
  EXPECT_EQ(readError({"--strategies", "sqrt,optimal:half%"}),
            "--strategies optimal:half%: optimal: BYTES must be a byte count like 4096, 64K, 1.5M or 2G, or a share "
            "of store-all's peak like 50%, got 'half%'");
}

// The screenshot is grabbed once the window shows what the options asked
// for: the runs made, the strategy and the step shown, at the size asked.
TEST(WindowStart, AScreenshotOfALargeModelWaitsForItsRuns) {
  QTemporaryDir dir;
  const QString path = dir.filePath("shot.png");
  Started s(kLarge + QStringList{"--step", "1500", "--size", "1200x800", "--screenshot", path});
  int computing = -1, code = -1;
  std::size_t step = 0;
  QString run;
  QObject::connect(s.start, &WindowStart::finished, [&](int c) {
    code = c;
    computing = s.doc()->computing();
    step = s.doc()->shownStep();
    run = s.doc()->current() ? QString::fromStdString(s.doc()->current()->name) : QString();
  });
  ASSERT_TRUE(QTest::qWaitFor([&] { return code >= 0; }, 60000));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(computing, 0);
  EXPECT_EQ(run, "dtr:40");
  EXPECT_EQ(step, 1499u);
  const QImage shot(path);
  EXPECT_EQ(shot.size(), QSize(1200, 800));
}

// --run starts once the runs are made (before, on a large model, it ran none
// of them and measured nothing), and the window settles once it measured.
TEST(WindowStart, ARunOnALargeModelMeasuresEveryComparedStrategy) {
  Started s({"mlp:101:8:2", "--strategies", "store-all,sqrt", "--run", "--tab", "1"});
  ASSERT_GT(s.doc()->model().size(), StudioDocument::kInlineOps);
  ASSERT_TRUE(s.settle());
  EXPECT_FALSE(s.w.runner()->running());
  ComparisonModel* table = s.w.comparison();
  ASSERT_EQ(table->rowCount(), 2);
  // The tracked peaks: the simulated ones, to the byte (remat run prints the same).
  EXPECT_EQ(table->data(table->index(0, ComparisonModel::MeasuredPeak)).toString(), "6.50 KiB");
  EXPECT_EQ(table->data(table->index(1, ComparisonModel::MeasuredPeak)).toString(), "1.38 KiB");
  EXPECT_EQ(s.said(), "");
}

// The chain presets are simulate-only: --run says why it cannot, once the
// runs are made, and the window still settles.
TEST(WindowStart, ARunThatCannotStartIsSaid) {
  Started s(kLarge + QStringList{"--run"});
  ASSERT_TRUE(s.settle());
  const QString why = RunController::cannotRun(s.doc()->model());
  ASSERT_FALSE(why.isEmpty());
  EXPECT_EQ(s.said(), ("--run: " + why).toStdString());
  EXPECT_FALSE(s.w.runner()->running());
}

// Headless, a model that does not open ends the screenshot with code 2 and
// core's message, instead of a dialog nobody can close; no file is written.
TEST(WindowStart, AScreenshotOfAModelThatDoesNotOpenEndsWithItsMessage) {
  QTemporaryDir dir;
  const QString path = dir.filePath("shot.png");
  Started s({dir.filePath("missing.json"), "--screenshot", path});
  QSignalSpy finished(s.start, &WindowStart::finished);
  ASSERT_TRUE(finished.wait(10000));
  EXPECT_EQ(finished.first().first().toInt(), 2);
  ASSERT_EQ(s.notices.size(), 1);
  EXPECT_TRUE(s.notices[0].contains("missing.json")) << s.said();
  EXPECT_FALSE(QFileInfo::exists(path));
}

TEST(WindowStart, ValuesThatCannotBeOptionsAreRefused) {
  EXPECT_EQ(readError({"--step", "0"}), "--step 0: not a step number (1 is the first)");
  EXPECT_EQ(readError({"--step", "abc"}), "--step abc: not a step number (1 is the first)");
  EXPECT_EQ(readError({"--size", "800"}), "--size 800: not WIDTHxHEIGHT (1500x950)");
  EXPECT_EQ(readError({"--size", "0x10"}), "--size 0x10: not WIDTHxHEIGHT (1500x950)");
  EXPECT_EQ(readError({"--tab", "5"}), "--tab 5: not a tab (0: timeline, 1: comparison, 2: trade-off)");
  EXPECT_EQ(readError({"--show", "dtr:lots"}),
            "--show dtr:lots: dtr: BYTES must be a byte count like 4096, 64K, 1.5M or 2G, got 'lots'");
  // The list's bad spec is named alone; manual's ids stay one spec, as `remat` splits them.
  EXPECT_EQ(readError({"--strategies", "store-all,manual:2,5,every-k:0"}),
            "--strategies every-k:0: " + QString::fromStdString(request_strategy("every-k:0").error));
  QCommandLineParser cli;
  add_start_options(cli);
  ASSERT_TRUE(cli.parse({"remat-studio", "--strategies", "store-all,manual:2,5,sqrt"}));
  StartOptions o;
  QString error;
  EXPECT_TRUE(read_start_options(cli, o, error)) << error.toStdString();
  EXPECT_EQ(o.strategies, QString("store-all,manual:2,5,sqrt"));
}
