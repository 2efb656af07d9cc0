// Side by side: three strategies at one phase of the step, each lane in its
// strategy's colour with its own memory readout, following the shown
// strategy; checked on a grabbed picture of the view.
#include <QComboBox>
#include <QDockWidget>
#include <QMenuBar>
#include <QPainter>
#include <QScatterSeries>
#include <QTest>
#include <algorithm>
#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/views/graph_view.h"
#include "widgets/views/lanes_painter.h"
#include "tests/widgets/shown_window.h"
#include "widgets/views/main_window.h"
#include "widgets/views/side_by_side_view.h"
#include "widgets/document/strategy_colors.h"
#include "widgets/views/timeline_chart.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
int resident_activations(const NodeStates& s) {
  return int(std::count(s.fwd.begin(), s.fwd.end(), FwdState::Live));
}
}  // namespace

TEST(SideBySide, ThreeLanesAtOnePhaseInTheirColours) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  doc.setSpecs(StudioDocument::defaultSpecs());  // store-all, recompute-all, sqrt
  ASSERT_EQ(doc.runCount(), 3);
  SideBySideView view(&doc);
  view.resize(900, 600);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  EXPECT_EQ(view.laneRuns(), (std::vector<int>{0, 1, 2}));

  // Show sqrt at the end of its forward pass (its last first forward).
  doc.setCurrentRun(2);
  const Model m = load_model("chain:16");
  const Schedule sqrt = make_strategy("sqrt")->schedule(m);
  std::size_t lastFwd = 0;
  for (std::size_t t = 0; t < sqrt.code.size(); ++t)
    if (sqrt.code[t].kind == InstrKind::Fwd && sqrt.code[t].op == m.loss()) lastFwd = t;
  doc.setStep(lastFwd);
  const std::vector<Lane> lanes = view.lanes();
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes[2].step, lastFwd);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(lanes[std::size_t(r)].step, doc.stepAtPhase(r));
    // The same moment: each lane runs the loss's forward too.
    const Instr ins = doc.runs()[std::size_t(r)].schedule.code[lanes[std::size_t(r)].step];
    EXPECT_EQ(ins.kind, InstrKind::Fwd);
    EXPECT_EQ(ins.op, m.loss());
  }
  // O(n) / O(1) / O(sqrt n): store-all holds every activation, recompute-all
  // the fewest, sqrt in between (by the simulator's resident set).
  const int a = resident_activations(lanes[0].states), b = resident_activations(lanes[1].states),
            c = resident_activations(lanes[2].states);
  EXPECT_EQ(a, m.size() - 1);  // all but the loss, being computed
  EXPECT_LT(b, c);
  EXPECT_LT(c, a);

  const QImage img = view.grab().toImage();
  const double dpr = img.devicePixelRatio();
  for (int i = 0; i < 3; ++i) {
    const QRectF lane = lane_rect(QRectF(view.rect()), i, 3, 1, true);
    const QColor want = strategy_color(QString::fromStdString(doc.runs()[std::size_t(i)].name));
    EXPECT_EQ(img.pixelColor(QPointF(2 * dpr, lane.center().y() * dpr).toPoint()), want) << i;
  }
  // Each lane says what it holds: its readout at its own step.
  QImage probe(900, 600, QImage::Format_RGB32);
  QPainter p(&probe);
  std::vector<GraphPaintReport> reports;
  paint_lanes(p, doc.model(), GraphLayout(doc.model()), lanes, QRectF(0, 0, 900, 600), 1, true, &reports);
  ASSERT_EQ(reports.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const StrategyRun& run = doc.runs()[std::size_t(i)];
    // The lane's header: the name, then the readout on two lines.
    const auto& texts = reports[std::size_t(i)].texts;
    for (const QString& want : {QString::fromStdString(run.name),
                                "resident " + format_bytes(run.sim.timeline[lanes[std::size_t(i)].step]),
                                "peak " + format_bytes(simulate(m, run.schedule).peak_bytes)})
      EXPECT_TRUE(std::any_of(texts.begin(), texts.end(), [&](const auto& t) { return t.first == want; }))
          << run.name << ": " << want.toStdString();
  }
}

TEST(SideBySide, TheWindowsViewMenuSwitchesAndTheChartDotsFollow) {
  MainWindow w;
  w.openModel("chain:16", true);
  w.document()->setSpecs(StudioDocument::defaultSpecs());
  w.resize(1400, 900);
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  w.findChild<QComboBox*>("xMode")->setCurrentIndex(0);  // the instruction axis (own length is the default)
  QAction* sbs = w.action("Side by side");
  ASSERT_NE(sbs, nullptr);
  sbs->trigger();
  EXPECT_TRUE(w.sideBySide());
  EXPECT_TRUE(w.sideBySideView()->isVisible());
  EXPECT_FALSE(w.graphView()->isVisible());
  // The chart's dots mark the lanes' moments: each curve at its lane's step.
  StudioDocument* doc = w.document();
  doc->setCurrentRun(2);
  doc->setStep(40);
  const std::vector<Lane> lanes = w.sideBySideView()->lanes();
  const auto dots = w.timeline()->phaseDots();
  ASSERT_EQ(dots.size(), 3);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(dots[r]->count(), 1);
    EXPECT_EQ(dots[r]->at(0).x(), double(lanes[std::size_t(r)].step));
    EXPECT_EQ(dots[r]->at(0).y() * w.timeline()->unitBytes(),
              double(doc->runs()[std::size_t(r)].sim.timeline[lanes[std::size_t(r)].step]));
  }
  sbs->trigger();
  EXPECT_FALSE(w.sideBySide());
}

// Side by side in the normal window at 1400 x 900 labels its nodes: the
// lanes' labels are drawn (whole), not left out for want of room.
TEST(SideBySide, LanesAreLabelledAt1400) {
  remat::testing::ShownWindow shown("chain:16", StudioDocument::defaultSpecs(), {1400, 900});
  MainWindow& w = shown.w;
  w.action("Side by side")->trigger();
  QTest::qWait(50);
  SideBySideView* view = w.sideBySideView();
  const QSize size = view->size();
  const std::vector<GraphPaintReport> reports = remat::testing::painted_lanes(*view, *w.document());
  ASSERT_EQ(reports.size(), 3u);
  for (const GraphPaintReport& r : reports) {
    for (const QString& want : {QString("a1"), QString("G(a1)")})
      EXPECT_TRUE(std::any_of(r.texts.begin(), r.texts.end(), [&](const auto& t) { return t.first == want; }))
          << want.toStdString() << " in a lane of " << size.width() << "x" << size.height();
  }
}
