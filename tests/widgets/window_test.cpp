#include <QComboBox>
#include <QAbstractItemModelTester>
#include <QAction>
#include <QLineEdit>
#include <QSettings>
#include <QSignalSpy>
#include <QStatusBar>
#include <QApplication>
#include <QMouseEvent>
#include <QLineSeries>
#include <QTest>
#include <QTreeWidget>
#include <gtest/gtest.h>

#include "core/exec/cuda_module.h"
#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/views/activity_bar.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/elided_label.h"
#include "widgets/views/graph_view.h"
#include "tests/widgets/shown_window.h"
#include "widgets/views/main_window.h"
#include "widgets/controllers/playback_controller.h"
#include "widgets/controllers/run_controller.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/timeline_chart.h"

using namespace remat;

namespace {
using Window = remat::testing::ShownWindow;

double maxY(const QLineSeries* s) {
  double m = 0;
  for (const QPointF& p : s->points()) m = std::max(m, p.y());
  return m;
}
}  // namespace

TEST(MainWindow, OpensOnTheDemo) {
  Window t;
  StudioDocument* doc = t.w.document();
  EXPECT_EQ(doc->model().name, "chain:16");
  ASSERT_EQ(doc->runCount(), 3);
  EXPECT_EQ(t.w.comparison()->rowCount(), 3);
  EXPECT_FALSE(doc->caption().isEmpty());
}

TEST(MainWindow, ClickingANodeTogglesAManualCheckpoint) {
  Window t;
  StudioDocument* doc = t.w.document();
  GraphView* g = t.w.graphView();
  // Click a6 in the forward row.
  QTest::mouseClick(g, Qt::LeftButton, {}, g->nodePosition(6).toPoint());
  const int m = doc->manualRun();
  ASSERT_GE(m, 0);
  EXPECT_EQ(doc->currentRun(), m);
  // Started from store-all's (empty) checkpoint set: the input and a6.
  EXPECT_EQ(doc->runs()[std::size_t(m)].spec, "manual:0,6");
  const Model model = load_model("chain:16");
  const uint64_t expected = simulate(model, make_strategy("manual:0,6")->schedule(model)).peak_bytes;
  const QModelIndex peak = t.w.comparison()->index(m, ComparisonModel::Peak);
  EXPECT_EQ(t.w.comparison()->data(peak, Qt::EditRole).toULongLong(), expected);
  // Click a10 too, then a6 again to remove it.
  QTest::mouseClick(g, Qt::LeftButton, {}, g->nodePosition(10).toPoint());
  EXPECT_EQ(doc->runs()[std::size_t(doc->manualRun())].spec, "manual:0,6,10");
  QTest::mouseClick(g, Qt::LeftButton, {}, g->nodePosition(6).toPoint());
  EXPECT_EQ(doc->runs()[std::size_t(doc->manualRun())].spec, "manual:0,10");
  const uint64_t e2 = simulate(model, make_strategy("manual:0,10")->schedule(model)).peak_bytes;
  EXPECT_EQ(t.w.comparison()->data(t.w.comparison()->index(doc->manualRun(), ComparisonModel::Peak), Qt::EditRole)
                .toULongLong(),
            e2);
  // The chart follows: one series per strategy.
  EXPECT_EQ(t.w.timeline()->strategySeries().size(), 4);
  // Clicking empty space changes nothing.
  QTest::mouseClick(g, Qt::LeftButton, {}, QPoint(2, 2));
  EXPECT_EQ(doc->runs()[std::size_t(doc->manualRun())].spec, "manual:0,10");
}

TEST(MainWindow, TransportShortcutsMoveTheStep) {
  Window t;
  StudioDocument* doc = t.w.document();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&t.w));
  t.w.graphView()->setFocus();
  doc->setStep(0);
  QTest::keyClick(&t.w, Qt::Key_Right);
  EXPECT_EQ(doc->step(), 1u);
  QTest::keyClick(&t.w, Qt::Key_Right);
  QTest::keyClick(&t.w, Qt::Key_Left);
  EXPECT_EQ(doc->step(), 1u);
  QTest::keyClick(&t.w, Qt::Key_End);
  EXPECT_EQ(doc->step(), doc->stepCount() - 1);
  QTest::keyClick(&t.w, Qt::Key_Home);
  EXPECT_EQ(doc->step(), 0u);
  QTest::keyClick(&t.w, Qt::Key_Space);
  EXPECT_TRUE(t.w.player()->playing());
  QTest::keyClick(&t.w, Qt::Key_Space);
  EXPECT_FALSE(t.w.player()->playing());
}

TEST(PlaybackController, PlaysToTheEndAndStops) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  PlaybackController p(&doc);
  p.setSpeed(PlaybackController::kFullSpeed);
  p.play();
  EXPECT_TRUE(QTest::qWaitFor([&] { return !p.playing(); }, 5000));
  EXPECT_EQ(doc.step(), doc.stepCount() - 1);
}

TEST(TimelineChart, OneSeriesPerStrategyWithTheRightPeak) {
  Window t;
  const auto& runs = t.w.document()->runs();
  const auto series = t.w.timeline()->strategySeries();
  ASSERT_EQ(series.size(), 3);
  for (int i = 0; i < 3; ++i) {
    const StrategyRun& r = runs[std::size_t(i)];
    EXPECT_EQ(series[i]->name(), QString("%1 · peak %2")
                                     .arg(QString::fromStdString(r.name), format_bytes(r.sim.peak_bytes)));
    EXPECT_EQ(maxY(series[i]), double(runs[std::size_t(i)].sim.peak_bytes));
    EXPECT_EQ(std::size_t(series[i]->count()), runs[std::size_t(i)].sim.timeline.size());  // short: not reduced
  }
  EXPECT_EQ(t.w.timeline()->peakMarkers().size(), 3);
}

TEST(TimelineChart, DownsamplingKeepsThePeak) {
  // 100k+ instructions: recompute-all on chain:450.
  const Model m = load_model("chain:450:4096");  // 4 KiB tensors
  const auto runs = simulate_strategies(m, {"store-all", "recompute-all", "sqrt"});
  ASSERT_GT(runs[1].sim.timeline.size(), 100000u);
  TimelineChart chart;
  chart.resize(900, 400);
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  chart.setRuns(runs);
  const auto series = chart.strategySeries();
  ASSERT_EQ(series.size(), 3);
  // One unit for the axis: the largest power of 1024 the highest peak reaches (MiB here).
  double unit = 1;
  while (double(runs[0].sim.peak_bytes) >= unit * 1024) unit *= 1024;
  ASSERT_EQ(unit, 1024.0 * 1024.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(chart.unitBytes(), unit);
    EXPECT_DOUBLE_EQ(maxY(series[i]) * chart.unitBytes(), double(runs[std::size_t(i)].sim.peak_bytes))
        << runs[std::size_t(i)].name;
    EXPECT_LE(series[i]->count(), 2 * chart.buckets());
  }
  EXPECT_LT(series[1]->count(), 5000);
}

TEST(ComparisonModel, PassesTheModelTesterAndShowsFigures) {
  const Model m = load_model("chain:16");
  const auto runs = simulate_strategies(m, {"store-all", "recompute-all", "sqrt", "every-k:0"});
  ComparisonModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setRuns(&m, &runs);
  ASSERT_EQ(model.rowCount(), 4);
  EXPECT_EQ(model.data(model.index(0, ComparisonModel::Tensors)).toULongLong(), 18u);
  EXPECT_EQ(model.data(model.index(1, ComparisonModel::Tensors)).toULongLong(), 5u);
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::Tensors)).toULongLong(), 9u);
  EXPECT_EQ(model.data(model.index(1, ComparisonModel::ForwardSteps)).toLongLong(), 136);
  EXPECT_EQ(model.data(model.index(1, ComparisonModel::Recomputed)).toLongLong(), 120);
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::Overhead)).toString(), "21.4%");
  EXPECT_TRUE(model.data(model.index(3, ComparisonModel::Peak)).toString().startsWith("invalid: "));
  EXPECT_FALSE(model.headerData(ComparisonModel::Time, Qt::Horizontal, Qt::ToolTipRole).toString().contains("Measured on"));
  std::map<std::string, MeasuredRun> measured;
  MeasuredRun sqrt_run;
  sqrt_run.backend = "cuda: NVIDIA H100 80GB HBM3";
  sqrt_run.status = "ok";
  sqrt_run.tracked_peak = 9;
  sqrt_run.allocator_peak = 1000;
  sqrt_run.reserved_peak = 2048;
  sqrt_run.baseline = 77;
  sqrt_run.time_ms = 1.5;
  sqrt_run.matches_reference = true;
  measured["sqrt"] = sqrt_run;
  model.setMeasured(measured);
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::MeasuredPeak)).toString(), "9 B");
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::AllocatorPeak)).toString(), "1000 B");
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::ReservedPeak)).toString(), "2.00 KiB");
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::Baseline), Qt::EditRole).toULongLong(), 77u);
  // Every column says what it measures.
  for (int c = 0; c < ComparisonModel::ColumnCount; ++c)
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  EXPECT_TRUE(model.headerData(ComparisonModel::MeasuredPeak, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains("bookkeeping"));
  // The measured columns say what measured; the predicted ones do not.
  for (int c = ComparisonModel::MeasuredPeak; c < ComparisonModel::ColumnCount; ++c)
    EXPECT_TRUE(model.headerData(c, Qt::Horizontal, Qt::ToolTipRole)
                    .toString()
                    .endsWith("\nMeasured on the GPU (NVIDIA H100 80GB HBM3)"))
        << c;
  EXPECT_FALSE(model.headerData(ComparisonModel::Peak, Qt::Horizontal, Qt::ToolTipRole).toString().contains("Measured on"));
  EXPECT_EQ(model.data(model.index(2, ComparisonModel::Match)).toString(), "bit-identical");
}

TEST(MainWindow, ZoomedInClicksStillHitTheNodeAndTheCursorFollows) {
  Window t;
  t.w.findChild<QComboBox*>("xMode")->setCurrentIndex(0);  // the instruction axis (own length is the default)
  StudioDocument* doc = t.w.document();
  GraphView* g = t.w.graphView();
  g->zoomBy(3, g->nodePosition(9));
  const QPointF p = g->nodePosition(9);
  ASSERT_TRUE(g->rect().contains(p.toPoint()));
  QTest::mouseClick(g, Qt::LeftButton, {}, p.toPoint());
  ASSERT_GE(doc->manualRun(), 0);
  EXPECT_EQ(doc->runs()[std::size_t(doc->manualRun())].spec, "manual:0,9");
  // A drag pans and toggles nothing.
  const QPointF before = g->nodePosition(9);
  QTest::mousePress(g, Qt::LeftButton, {}, QPoint(100, 100));
  QMouseEvent move(QEvent::MouseMove, QPointF(160, 110), g->mapToGlobal(QPointF(160, 110)), Qt::NoButton,
                   Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(g, &move);
  QTest::mouseRelease(g, Qt::LeftButton, {}, QPoint(160, 110));
  EXPECT_EQ(g->nodePosition(9) - before, QPointF(60, 10));
  EXPECT_EQ(doc->runs()[std::size_t(doc->manualRun())].spec, "manual:0,9");
  // The chart's cursor sits at the current step.
  doc->setStep(7);
  EXPECT_EQ(t.w.timeline()->cursorSeries()->at(0).x(), 7.0);
}

TEST(TimelineChart, MeasuredSeriesBesideThePredictedOnes) {
  const Model m = load_model("chain:16");
  const auto runs = simulate_strategies(m, {"store-all", "sqrt"});
  TimelineChart chart;
  chart.resize(800, 400);
  chart.setRuns(runs);
  chart.setMeasured({{"sqrt", runs[1].sim.timeline}});
  ASSERT_EQ(chart.measuredSeries().size(), 1);
  EXPECT_EQ(chart.measuredSeries()[0]->name(), "sqrt (measured)");
  EXPECT_EQ(maxY(chart.measuredSeries()[0]), double(runs[1].sim.peak_bytes));
  chart.setRuns(runs);  // a new simulation drops stale measurements
  EXPECT_TRUE(chart.measuredSeries().isEmpty());
}


// Run › Run on: the GPU when one answers (the default, as `remat run`), the
// CPU, or the GPU only; the choice is kept. Without a GPU the default runs on
// the CPU and the status says why; without the CUDA module the GPU choices are
// disabled and say why.
TEST(MainWindow, RunOnChoosesTheDeviceAndKeepsIt) {
  QSettings().remove("runDevice");
  std::string why;
  const bool gpu = load_cuda_backend(&why) != nullptr;
  {
    Window t;
    auto* automatic = t.w.findChild<QAction*>("runOn_auto");
    auto* cpu = t.w.findChild<QAction*>("runOn_cpu");
    auto* only = t.w.findChild<QAction*>("runOn_gpu");
    ASSERT_TRUE(automatic && cpu && only);
    EXPECT_EQ(automatic->isEnabled(), RunController::gpuBuilt());
    EXPECT_EQ(only->isEnabled(), RunController::gpuBuilt());
    if (!RunController::gpuBuilt()) {
      EXPECT_TRUE(cpu->isChecked());
      EXPECT_TRUE(only->toolTip().contains("no CUDA backend"));
      return;
    }
    EXPECT_TRUE(automatic->isChecked());
    EXPECT_EQ(t.w.runner()->device(), RunDevice::Auto);
    ASSERT_TRUE(t.w.openModel("chain:16:4", true));  // one that runs: the tooltip names the device
    EXPECT_TRUE(t.w.runAction()->toolTip().contains("the GPU if one answers, else the CPU"));
    cpu->trigger();
    EXPECT_EQ(t.w.runner()->device(), RunDevice::Cpu);
    EXPECT_TRUE(t.w.runAction()->toolTip().contains("on the CPU"));
    EXPECT_EQ(QSettings().value("runDevice").toString(), "cpu");
  }
  {
    Window t;  // kept
    EXPECT_TRUE(t.w.findChild<QAction*>("runOn_cpu")->isChecked());
    EXPECT_EQ(t.w.runner()->device(), RunDevice::Cpu);
    t.w.findChild<QAction*>("runOn_auto")->trigger();
    EXPECT_EQ(t.w.runner()->device(), RunDevice::Auto);
    if (gpu) return;  // the rest is the fallback
    ASSERT_TRUE(t.w.openModel("chain:16:4", true));
    QSignalSpy done(t.w.runner(), &RunController::finished);
    t.w.startRun();
    EXPECT_TRUE(t.w.activity()->text().startsWith("Running")) << t.w.activity()->text().toStdString();
    ASSERT_TRUE(done.wait(30000));
    EXPECT_EQ(t.w.statusBar()->currentMessage(),
              QString("Run finished on the CPU (no GPU: %1)").arg(QString::fromStdString(why)));
  }
  QSettings().remove("runDevice");
}

TEST(MainWindow, RunSaysWhyBeforeAndTheStatusNeverStaysRunning) {
  Window t;
  QAction* run = t.w.runAction();
  // chain:16 counts in 1-byte tensors: the action says so before it is pressed.
  EXPECT_FALSE(run->isEnabled());
  EXPECT_TRUE(run->text().contains("try chain:16:4")) << run->text().toStdString();
  ASSERT_TRUE(t.w.openModel("chain:16:4", true));
  EXPECT_TRUE(run->isEnabled());
  t.w.findChild<QAction*>("runOn_cpu")->trigger();  // Run › Run on › The CPU
  QSignalSpy done(t.w.runner(), &RunController::finished);
  t.w.startRun();
  EXPECT_TRUE(t.w.activity()->active("run"));
  EXPECT_FALSE(run->isEnabled());
  ASSERT_TRUE(done.wait(30000));
  EXPECT_FALSE(t.w.activity()->busy());
  EXPECT_TRUE(run->isEnabled());
  EXPECT_EQ(t.w.statusBar()->currentMessage(), "Run finished on the CPU");
  // The table shows what was measured: the tracked peak equals the prediction.
  for (int row = 0; row < t.w.comparison()->rowCount(); ++row)
    EXPECT_EQ(t.w.comparison()->data(t.w.comparison()->index(row, ComparisonModel::MeasuredPeak), Qt::EditRole),
              t.w.comparison()->data(t.w.comparison()->index(row, ComparisonModel::Peak), Qt::EditRole));
  // Cancelled: the busy area goes away at once.
  t.w.startRun();
  t.w.cancelAll();
  EXPECT_FALSE(t.w.activity()->busy());
  EXPECT_EQ(t.w.statusBar()->currentMessage(), "Run cancelled");
}

TEST(MainWindow, AFailedLoadKeepsTheBoxOnTheDrawnModel) {
  Window t;
  auto* box = t.w.findChild<QLineEdit*>("modelSpec");
  ASSERT_NE(box, nullptr);
  box->setText("chain:banana");
  EXPECT_FALSE(t.w.openModel("chain:banana", true));
  EXPECT_EQ(box->text(), "chain:16");
  EXPECT_EQ(t.w.document()->model().name, "chain:16");
}

// The window fits a 1366x768 laptop screen: at 1280x720 it keeps that size
// (its minimum used to be 1520 px wide, held by the timeline's hint and the
// x-axis box's longest entry), the hint gives up its last phrases (whole ones,
// no "…") and shows whole on a wide window, and the strategy statuses are not cut.
TEST(MainWindow, FitsALaptopScreen) {
  Window t("resnet:18:16:64:8:10", StudioDocument::defaultSpecs(), {1280, 720});
  EXPECT_LE(t.w.minimumSizeHint().width(), 1280);
  EXPECT_EQ(t.w.size(), QSize(1280, 720));
  auto* hint = t.w.findChild<ElidedLabel*>("timelineHint");
  ASSERT_NE(hint, nullptr);
  const QString shown = hint->shownText();
  EXPECT_LT(shown.size(), hint->text().size());
  EXPECT_FALSE(shown.contains(QChar(0x2026))) << shown.toStdString();
  EXPECT_TRUE(hint->text().startsWith(shown + " · ")) << shown.toStdString();  // whole phrases
  EXPECT_LE(hint->fontMetrics().horizontalAdvance(shown), hint->contentsRect().width());
  EXPECT_EQ(hint->toolTip(), hint->text());
  t.w.resize(1800, 900);
  QApplication::processEvents();
  EXPECT_EQ(hint->shownText(), hint->text());
  auto* tree = t.w.findChild<QTreeWidget*>();
  ASSERT_NE(tree, nullptr);
  const QTreeWidgetItem* store = tree->topLevelItem(0);
  ASSERT_FALSE(store->text(2).isEmpty());
  EXPECT_LE(tree->fontMetrics().horizontalAdvance(store->text(2)) + 8, tree->columnWidth(2)) << store->text(2).toStdString();
}
