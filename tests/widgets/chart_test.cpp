// The memory chart read like a figure: round ticks in one unit, a fixed colour
// and a distinct dash per strategy, each strategy scaled to its own length on
// request, click to seek, hover text; checked on the chart's axes and on a
// grabbed picture.
#include <QLineSeries>
#include <QTest>
#include <QValueAxis>
#include <cmath>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "core/strategies/registry.h"
#include "widgets/views/chart_scale.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/main_window.h"
#include "widgets/document/strategy_colors.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/timeline_chart.h"

using namespace remat;

namespace {
// 1, 2 or 5 times a power of ten.
bool round_step(double step) {
  const double p = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double m = step / p;
  return std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9;
}

struct Chart {
  Model model = load_model("chain:16");
  std::vector<StrategyRun> runs = simulate_strategies(model, {"store-all", "recompute-all", "sqrt"});
  TimelineChart chart;
  Chart() {
    chart.resize(900, 400);
    chart.setRuns(runs);
    chart.show();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(&chart));
  }
};
}  // namespace

TEST(ChartScale, RoundTicksAndOneUnit) {
  // 17 with at most 6 ticks: steps of 1 (18 ticks) and 2 (10 ticks) are too
  // many; 5 gives 0, 5, 10, 15, 20.
  const NiceScale s = nice_scale(17, 6);
  EXPECT_EQ(s.step, 5);
  EXPECT_EQ(s.top, 20);
  EXPECT_EQ(s.ticks(), 5);
  EXPECT_EQ(nice_scale(100, 6).step, 20);  // 0..100 in 6 ticks
  EXPECT_EQ(nice_scale(0.37, 5).step, 0.1);
  EXPECT_EQ(byte_unit(1023).name, "B");
  EXPECT_EQ(byte_unit(1024).bytes, 1024);
  EXPECT_EQ(byte_unit(5u << 20).name, "MiB");
  EXPECT_EQ(byte_unit(uint64_t(3) << 30).bytes, double(uint64_t(1) << 30));
}

TEST(TimelineChart, RoundTicksFixedColoursDistinctDashes) {
  Chart t;
  QValueAxis* y = t.chart.axisY();
  EXPECT_EQ(y->tickType(), QValueAxis::TicksDynamic);
  EXPECT_TRUE(round_step(y->tickInterval())) << y->tickInterval();
  EXPECT_DOUBLE_EQ(std::fmod(y->max(), y->tickInterval()), 0.0);
  EXPECT_GE(y->max() * t.chart.unitBytes(), double(t.runs[0].sim.peak_bytes));  // store-all's is the highest
  EXPECT_TRUE(y->titleText().contains("(" + byte_unit(t.runs[0].sim.peak_bytes).name + ")"));
  const auto series = t.chart.strategySeries();
  ASSERT_EQ(series.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(series[i]->pen().color(), strategy_color(QString::fromStdString(t.runs[std::size_t(i)].name)));
    for (int j = 0; j < i; ++j) EXPECT_NE(series[i]->pen().style(), series[j]->pen().style());
  }
  // The colour belongs to the strategy, not to its position.
  TimelineChart other;
  const auto reordered = simulate_strategies(t.model, {"sqrt", "store-all"});
  other.setRuns(reordered);
  EXPECT_EQ(other.strategySeries()[0]->pen().color(), series[2]->pen().color());
  EXPECT_EQ(other.strategySeries()[1]->pen().color(), series[0]->pen().color());
  // The three seeds are told apart by colour too.
  EXPECT_NE(series[0]->pen().color(), series[1]->pen().color());
  EXPECT_NE(series[1]->pen().color(), series[2]->pen().color());
  EXPECT_NE(series[0]->pen().color(), series[2]->pen().color());
}

TEST(TimelineChart, TheGrabbedPictureShowsEachCurveInItsColour) {
  Chart t;
  QTest::qWait(50);
  const QImage img = t.chart.grab().toImage();
  // Near each strategy's peak there are pixels of its colour.
  for (int r = 0; r < 3; ++r) {
    const StrategyRun& run = t.runs[std::size_t(r)];
    const QPointF at = t.chart.positionOf(r, run.sim.peak_index) * img.devicePixelRatio();
    const QColor want = strategy_color(QString::fromStdString(run.name));
    int hits = 0;
    for (int dx = -6; dx <= 6; ++dx)
      for (int dy = -6; dy <= 6; ++dy) {
        const QPoint p = at.toPoint() + QPoint(dx, dy);
        if (img.rect().contains(p) && img.pixelColor(p) == want) ++hits;
      }
    EXPECT_GT(hits, 0) << run.name << " at " << at.x() << "," << at.y();
  }
}

TEST(TimelineChart, EachStrategyScaledToItsOwnLengthAndZoom) {
  Chart t;
  const double steps = double(t.runs[1].sim.timeline.size() - 1);  // recompute-all: the longest
  EXPECT_EQ(t.chart.xMax(), steps);
  // In instructions, store-all ends far left of recompute-all.
  const QPointF endA = t.chart.positionOf(0, t.runs[0].sim.timeline.size() - 1);
  const QPointF endB = t.chart.positionOf(1, t.runs[1].sim.timeline.size() - 1);
  EXPECT_LT(endA.x(), endB.x() - 100);
  t.chart.setXMode(TimelineChart::XMode::OwnLength);
  EXPECT_EQ(t.chart.xMax(), 100);
  for (int r = 0; r < 3; ++r)
    EXPECT_NEAR(t.chart.positionOf(r, t.runs[std::size_t(r)].sim.timeline.size() - 1).x(), endB.x(), 1.0);
  t.chart.setXMode(TimelineChart::XMode::Steps);
  t.chart.zoomX(10, 30);
  EXPECT_EQ(t.chart.xMin(), 10);
  EXPECT_EQ(t.chart.xMax(), 30);
  t.chart.resetZoom();
  EXPECT_EQ(t.chart.xMin(), 0);
  EXPECT_EQ(t.chart.xMax(), steps);
}

TEST(TimelineChart, HoverNamesStrategyStepAndBytes) {
  const Model m = load_model("chain:16");
  const auto runs = simulate_strategies(m, {"sqrt"});
  TimelineChart chart;
  chart.resize(900, 400);
  chart.setRuns(runs);
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  const std::size_t step = 20;
  const QString text = chart.hoverText(chart.positionOf(0, step));
  // Steps are shown counted from 1.
  EXPECT_EQ(text, QString("sqrt · step %1 · %2").arg(step + 1).arg(format_bytes(runs[0].sim.timeline[step])));
  EXPECT_TRUE(chart.hoverText(QPointF(2, 2)).isEmpty());  // outside the plot
}

TEST(MainWindow, ClickingTheChartSeeksTheShownStrategy) {
  MainWindow w;
  w.openModel("chain:16", true);
  w.document()->setSpecs(StudioDocument::defaultSpecs());
  w.resize(1400, 900);
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  StudioDocument* doc = w.document();
  doc->setCurrentRun(2);  // sqrt
  TimelineChart* chart = w.timeline();
  const std::size_t target = 25;
  const QPoint at = chart->positionOf(2, target).toPoint();
  QTest::mouseClick(chart->viewport(), Qt::LeftButton, {}, at);
  // Within one step of the pixel's rounding.
  EXPECT_NEAR(double(doc->step()), double(target), 1.0);
}

// Qt Charts makes one tick item per interval of an axis' range whenever
// either changes. Opening a long schedule after a short one, and zooming in
// and out, must never pass through a range under an interval that would make
// thousands of ticks (the window froze for minutes on chain:200 under
// recompute-all: 40,000 steps under the previous interval of 1).
TEST(TimelineChart, ScaleChangesNeverPassThroughThousandsOfTicks) {
  TimelineChart chart;
  chart.resize(900, 400);
  const Model small = load_model("chain:16");
  chart.setRuns(simulate_strategies(small, {"store-all"}));
  auto* ax = qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal).at(0));
  ASSERT_NE(ax, nullptr);
  double most = 0;
  auto watch = [&] { most = std::max(most, (ax->max() - ax->min()) / ax->tickInterval()); };
  QObject::connect(ax, &QValueAxis::rangeChanged, watch);
  QObject::connect(ax, &QValueAxis::tickIntervalChanged, watch);
  const Model big = load_model("chain:200");
  const auto runs = simulate_strategies(big, {"recompute-all"});
  ASSERT_GT(runs[0].sim.timeline.size(), 20000u);
  chart.setRuns(runs);
  EXPECT_GT(most, 0);
  chart.zoomX(100, 120);
  chart.resetZoom();
  chart.setRuns(simulate_strategies(small, {"store-all"}));
  EXPECT_LE(most, 20) << "ticks on the x axis at some moment";
}

// Every registered strategy has a colour of its own (none falls back to the
// grey of an unknown name, none repeats another's); a composed spec takes its
// head's.
TEST(StrategyColors, EveryCatalogEntryHasItsOwnColour) {
  QList<QRgb> seen;
  for (const auto& s : strategy_catalog()) {
    const QColor c = strategy_color(QString::fromStdString(s.name));
    EXPECT_NE(c, QColor(0x77, 0x77, 0x77)) << s.name;
    EXPECT_FALSE(seen.contains(c.rgb())) << s.name << " repeats " << c.name().toStdString();
    seen << c.rgb();
  }
  EXPECT_EQ(strategy_color("offload+sqrt"), strategy_color("offload"));
  EXPECT_EQ(strategy_color("revolve:4"), strategy_color("revolve"));
}
