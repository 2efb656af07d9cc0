// The Trade-off tab: the sweep fills it in a background job, and a clicked
// point is shown in the graph. The document's searches run in the background.
#include <QTabWidget>
#include <QTest>
#include <gtest/gtest.h>

#include "core/sim/simulator.h"
#include "widgets/views/main_window.h"
#include "widgets/document/studio_document.h"

#include <QLineSeries>
#include <QLogValueAxis>
#include <QValueAxis>
#include <QScatterSeries>
#include <limits>

#include "core/analysis/sweep.h"
#include "core/model/presets.h"
#include "core/strategies/registry.h"
#include "widgets/views/tradeoff_chart.h"

using namespace remat;

TEST(StudioDocument, ShowSpecAddsAndShowsAStrategy) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  doc.showSpec(parse_strategy("every-k:3"));
  ASSERT_EQ(doc.runCount(), 4);
  EXPECT_EQ(doc.current()->spec, "every-k:3");
  doc.showSpec(parse_strategy("sqrt"));  // already compared: only shown
  EXPECT_EQ(doc.runCount(), 4);
  EXPECT_EQ(doc.current()->spec, "sqrt");
}

TEST(MainWindow, TradeoffTabLoadsTheClickedSpec) {
  MainWindow w;
  w.openModel("chain:16", true);
  w.document()->setSpecs(StudioDocument::defaultSpecs());
  w.show();
  auto* chart = qobject_cast<TradeoffChart*>(w.tradeoffTab());
  ASSERT_NE(chart, nullptr);
  w.tabs()->setCurrentWidget(chart);  // starts the sweep in a worker
  ASSERT_TRUE(QTest::qWaitFor([&] { return !chart->namedSpecs().empty(); }, 20000));
  ASSERT_FALSE(chart->namedSpecs().empty());
  emit chart->pointClicked(parse_strategy("every-k:5"));
  EXPECT_EQ(w.document()->current()->spec, "every-k:5");
}

// optimal:... may use its whole time limit: the window shows the other runs at
// once, the search's run as pending, and fills it in when the worker is done.
TEST(StudioDocument, SearchesRunInTheBackground) {
  StudioDocument doc;
  doc.loadModel("transformer:12:16:4:2");
  // sqrt's peak: a budget whose search does not finish within its 1 s limit.
  doc.setSpecs({"sqrt", "optimal:18176:1"});
  ASSERT_EQ(doc.runCount(), 2);
  EXPECT_TRUE(doc.runs()[0].ok());
  EXPECT_TRUE(doc.runs()[1].pending);
  EXPECT_FALSE(doc.runs()[1].ok());
  EXPECT_EQ(doc.computing(), 1);
  doc.setSpecs({"optimal:18176:1", "store-all"});  // the same search is not started twice
  EXPECT_EQ(doc.computing(), 1);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.runCount() == 2 && doc.runs()[0].ok(); }, 20000));
  const StrategyRun& r = doc.runs()[0];
  EXPECT_EQ(r.spec, "optimal:18176:1");
  EXPECT_LE(r.sim.peak_bytes, 18176u);
  EXPECT_NE(r.schedule.note.find("not proven"), std::string::npos);
  EXPECT_EQ(doc.computing(), 0);
  doc.setCurrentRun(0);
  EXPECT_GT(doc.stepCount(), 0u);
}

// A search started for one model never lands in the next one.
TEST(StudioDocument, SearchOfAReplacedModelIsDropped) {
  StudioDocument doc;
  doc.loadModel("transformer:12:16:4:2");
  doc.setSpecs({"optimal:18176:1"});
  ASSERT_TRUE(doc.runs()[0].pending);
  doc.loadModel("chain:16");  // keeps the specs: a new search on chain:16 starts
  ASSERT_EQ(doc.runCount(), 1);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.runs()[0].ok(); }, 20000));
  EXPECT_EQ(doc.runs()[0].sim.timeline.size(), doc.runs()[0].schedule.code.size());
  EXPECT_EQ(doc.model().name, "chain:16");
  // chain:16's checkpoints are ops below 16: the transformer's result (ops up to 146) would not fit.
  EXPECT_TRUE(doc.residentIndex(0) != nullptr);
  QTest::qWait(1500);  // the transformer's search ends meanwhile and is dropped
  EXPECT_EQ(doc.runs()[0].sim.peak_bytes, simulate(doc.model(), doc.runs()[0].schedule).peak_bytes);
  EXPECT_LE(doc.runs()[0].sim.peak_bytes, 18176u);
}

// On a chain the staircase of nested checkpoints (budget:B) lies on or below
// the one-level staircase (checkpoint sets) at every budget, and strictly
// below somewhere: at low budgets one level recomputes more or does not fit.
TEST(TradeoffChart, ChainShowsNestedCheckpointsBelowOneLevel) {
  const Model m = make_preset("chain:30");
  const SweepResult r = sweep(m, auto_budgets(named_points(m)));
  TradeoffChart chart;
  chart.resize(800, 600);
  chart.setSweep("chain:30", r);
  QLineSeries* one = chart.singleLevelSeries();
  ASSERT_NE(one, nullptr);
  // A step line's level at x: its last point at or before x (+inf before its
  // first point: nothing with one level fits there).
  auto level = [](const QLineSeries* s, double x) {
    double y = std::numeric_limits<double>::infinity();
    for (int i = 0; i < s->count(); ++i)
      if (s->at(i).x() <= x + 1e-12) y = s->at(i).y();
    return y;
  };
  const QScatterSeries* front = chart.frontPoints();
  ASSERT_GT(front->count(), 3);
  int below = 0;
  for (int i = 0; i < front->count(); ++i) {
    const QPointF p = front->at(i);
    EXPECT_LE(p.y(), level(one, p.x()) + 1e-9) << "budget " << p.x();
    below += p.y() < level(one, p.x()) - 1e-9;
  }
  EXPECT_GT(below, 0);
  EXPECT_EQ(one->name(), "one level of checkpoints");
  // Not on a DAG: nesting is a chain's.
  const Model t = make_preset("transformer:1:16:4:2");
  SweepOptions o;
  o.optimal_seconds = 0.5;
  chart.setSweep("transformer", sweep(t, {simulate(t, make_strategy("sqrt")->schedule(t)).peak_bytes}, o));
  EXPECT_EQ(chart.singleLevelSeries(), nullptr);
}

// Where the values span more than 30x an axis is logarithmic, and 0 % sits on
// the log axis's floor with a label that still says 0 %; a narrow range keeps
// linear axes.
TEST(TradeoffChart, WideRangesGetLogAxes) {
  SweepResult wide;
  // Budgets from 4 B to 4,000 B; positive overheads from 50 % to 5,000 %
  // (recompute-all on a long chain), and store-all's 0 %.
  wide.budgets = {{4, true, parse_strategy("recompute-all"), 4, 50.0, 50.0},
                  {64, true, parse_strategy("sqrt"), 64, 0.5, 0.5},
                  {4000, true, parse_strategy("store-all"), 4000, 0.0, 0.0}};
  wide.named = {{parse_strategy("recompute-all"), 4, 50.0, 50.0}, {parse_strategy("sqrt"), 64, 0.5, 0.5}, {parse_strategy("store-all"), 4000, 0.0, 0.0}};
  TradeoffChart chart;
  chart.resize(800, 600);
  chart.setSweep("wide", wide);
  EXPECT_TRUE(chart.logX());
  EXPECT_TRUE(chart.logY());
  const auto h = chart.chart()->axes(Qt::Horizontal), v = chart.chart()->axes(Qt::Vertical);
  ASSERT_EQ(h.size(), 1);
  ASSERT_EQ(v.size(), 1);
  EXPECT_NE(qobject_cast<QLogValueAxis*>(h[0]), nullptr);
  auto* logY = qobject_cast<QLogValueAxis*>(v[0]);
  ASSERT_NE(logY, nullptr);
  EXPECT_TRUE(logY->titleText().contains("log scale"));
  // store-all's 0 % is drawn at the floor, half the smallest positive overhead.
  int storeAll = 0;
  for (QAbstractSeries* s : chart.chart()->series()) {
    auto* sp = qobject_cast<QScatterSeries*>(s);
    if (!sp || sp->name() != "store-all") continue;
    ++storeAll;
    ASSERT_EQ(sp->count(), 1);
    EXPECT_DOUBLE_EQ(sp->at(0).y(), 100.0 * 0.5 / 2);
    EXPECT_TRUE(sp->pointLabelsFormat().contains("(0 %)"));
    EXPECT_GE(sp->at(0).y(), logY->min());
  }
  EXPECT_EQ(storeAll, 1);

  SweepResult narrow;
  narrow.budgets = {{10, true, parse_strategy("sqrt"), 10, 0.4, 0.4}, {20, true, parse_strategy("store-all"), 20, 0.2, 0.2}};
  narrow.named = {{parse_strategy("sqrt"), 10, 0.4, 0.4}, {parse_strategy("store-all"), 20, 0.2, 0.2}};
  chart.setSweep("narrow", narrow);
  EXPECT_FALSE(chart.logX());
  EXPECT_FALSE(chart.logY());
  EXPECT_NE(qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal)[0]), nullptr);
  EXPECT_NE(qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Vertical)[0]), nullptr);
}
