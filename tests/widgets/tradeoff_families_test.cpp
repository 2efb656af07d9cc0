// The Trade-off tab's other families (offload, ...) beside recompute's
// staircase: their specs on a model, their points where the simulator and the
// time model put them, one legend entry per family.
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QTabWidget>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"
#include "core/sim/time_model.h"
#include "widgets/views/main_window.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/tradeoff_chart.h"
#include "widgets/views/tradeoff_families.h"

using namespace remat;

namespace {
const TradeoffFamily& offloadFamily() {
  for (const TradeoffFamily& f : tradeoff_families())
    if (std::string(f.name).rfind("offload", 0) == 0) return f;
  throw std::runtime_error("no offload family");
}

// The step time by the time model over the time of one forward and one
// backward pass at the same throughput, minus one: derived from the schedule.
double expectedOverhead(const Model& m, const std::string& spec) {
  const Schedule s = make_strategy(spec)->schedule(m);
  const StepTime t = predict_step_time(m, s, TimeModel{});
  double plain = 0;  // every op's forward once (not the given input) and its backward once
  for (int v = 1; v < m.size(); ++v) plain += m.op(v).fwd_flops + m.op(v).bwd_flops;
  return t.step_s / (plain / TimeModel::kDefaultDeviceFlops) - 1;
}
}  // namespace

// The family's specs, printed.
std::vector<std::string> printed(const std::vector<StrategySpec>& specs) {
  std::vector<std::string> out;
  for (const StrategySpec& s : specs) out.push_back(s.str());
  return out;
}

TEST(TradeoffFamilies, OffloadSpecsFollowTheModelsK) {
  // chain:16: sqrt's interval is ceil(sqrt(16)) = 4.
  EXPECT_EQ(printed(family_specs(offloadFamily(), make_preset("chain:16"))),
            (std::vector<std::string>{"offload:2", "offload+sqrt", "offload:8"}));
  // chain:1: K = 1, and K/2 rounds up to 1 too: listed once.
  EXPECT_EQ(sqrt_interval(make_preset("chain:1")), 1);
  EXPECT_EQ(printed(family_specs(offloadFamily(), make_preset("chain:1"))),
            (std::vector<std::string>{"offload:1", "offload+sqrt", "offload:2"}));
}

// dtr's points: 80, 60 and 40 % of store-all's peak (chain:16: 18 bytes).
TEST(TradeoffFamilies, DtrSpecsFollowStoreAllsPeak) {
  const Model m = make_preset("chain:16");
  ASSERT_EQ(simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes, 18u);
  const TradeoffFamily* dtr = nullptr;
  for (const TradeoffFamily& f : tradeoff_families())
    if (std::string(f.name).rfind("dtr", 0) == 0) dtr = &f;
  ASSERT_NE(dtr, nullptr);
  EXPECT_EQ(printed(family_specs(*dtr, m)), (std::vector<std::string>{"dtr:14", "dtr:10", "dtr:7"}));
}

TEST(TradeoffFamilies, RecomputeOverheadIsTheTimeModelsForSchedulesThatOnlyRecompute) {
  // What lets recompute's staircase and the other families share one y axis.
  const Model m = make_preset("transformer:2");
  for (const char* spec : {"sqrt", "recompute-all", "every-k:3"}) {
    const TimeModel tm;
    const auto runs = simulate_strategies(m, {spec}, {.timelines = false, .time = tm});
    EXPECT_NEAR(step_time_overhead(runs[0].sim, tm.device_flops), runs[0].sim.overhead, 1e-12) << spec;
    EXPECT_NEAR(expectedOverhead(m, spec), runs[0].sim.overhead, 1e-12) << spec;
  }
}

TEST(TradeoffFamilies, PointsAreWhereTheSimulatorAndTheTimeModelSay) {
  // One-byte tensors: each fetch (1 B over 25 GB/s) outlasts the few FLOPs it
  // could hide behind, so offload's stalls move its points above the
  // recompute overhead of its inner schedule. Offload's points come first.
  const Model m = make_preset("chain:16");
  const auto points = family_points(m, InstructionLimit{});
  const auto specs = family_specs(offloadFamily(), m);
  ASSERT_GE(points.size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i].str());
    EXPECT_EQ(points[i].spec, specs[i]);
    EXPECT_EQ(points[i].family, offloadFamily().name);
    const Simulation s = simulate(m, make_strategy(specs[i])->schedule(m));
    EXPECT_EQ(points[i].peak, s.peak_bytes);
    EXPECT_EQ(points[i].host_peak, s.peak_host_bytes);
    EXPECT_NEAR(points[i].overhead, expectedOverhead(m, specs[i].str()), 1e-9 * std::max(1.0, points[i].overhead));
    EXPECT_GT(points[i].stall_s, 0.0);
    EXPECT_GT(points[i].overhead, s.overhead);
  }
}

TEST(TradeoffFamilies, TheChartPlacesThemWithOneLegendEntry) {
  const Model m = make_preset("transformer:2");
  // The families a linear chart holds (dtr's 40 % point makes the y axis
  // logarithmic, where 0 % is drawn at a floor: placed in the window's test).
  auto points = family_points(m, InstructionLimit{});
  std::erase_if(points, [](const FamilyPoint& p) { return p.family.rfind("dtr", 0) == 0; });
  ASSERT_GE(points.size(), 2u);
  TradeoffChart chart;
  chart.resize(900, 500);
  chart.setSweep("transformer:2", SweepResult{}, points);
  chart.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&chart));
  ASSERT_EQ(chart.familyPoints().size(), points.size());
  ASSERT_FALSE(chart.logX());
  ASSERT_FALSE(chart.logY());
  // The x axis' unit: the largest that keeps the peak >= 1.
  uint64_t most = 0;
  for (const FamilyPoint& p : points) most = std::max(most, p.peak);
  const double unit = most >= (1u << 20) ? double(1u << 20) : most >= 1024 ? 1024.0 : 1.0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const QScatterSeries* s = chart.familyPoints()[i];
    ASSERT_EQ(s->count(), 1);
    EXPECT_DOUBLE_EQ(s->at(0).x(), double(points[i].peak) / unit);
    EXPECT_DOUBLE_EQ(s->at(0).y(), 100.0 * points[i].overhead);
    // Its spec labels it, alone or in the label of a point it would overlap.
    const QString spec = QString::fromStdString(points[i].spec.str());
    int naming = 0;
    for (const QScatterSeries* t : chart.familyPoints())
      naming += chart.shownLabel(t).split(", ").contains(spec) ? 1 : 0;
    EXPECT_EQ(naming, 1) << points[i].spec;
    // Its family's shape; the legend names the family once, at its first point.
    const TradeoffFamily* fam = nullptr;
    for (const TradeoffFamily& f : tradeoff_families())
      if (points[i].family == f.name) fam = &f;
    ASSERT_NE(fam, nullptr);
    EXPECT_EQ(s->markerShape(), fam->shape);
    const bool first = i == 0 || points[i - 1].family != points[i].family;
    const auto markers = chart.chart()->legend()->markers(const_cast<QScatterSeries*>(s));
    ASSERT_EQ(markers.size(), 1);
    EXPECT_EQ(markers[0]->isVisible(), first);
    EXPECT_EQ(markers[0]->label(), fam->name);
  }
  EXPECT_EQ(chart.familyPoints()[0]->markerShape(), QScatterSeries::MarkerShapeTriangle);  // offload's
}

TEST(TradeoffFamilies, TheWindowsTabShowsOffloadBesideTheStaircase) {
  MainWindow w;
  w.openModel("chain:16", true);
  w.show();
  auto* chart = w.tradeoffTab();
  w.tabs()->setCurrentWidget(chart);
  ASSERT_TRUE(QTest::qWaitFor([&] { return !chart->familyPoints().empty(); }, 30000));
  EXPECT_FALSE(chart->namedSpecs().empty());
  std::size_t expected = 0;  // every family's specs on chain:16 (each applies)
  for (const TradeoffFamily& f : tradeoff_families()) expected += family_specs(f, w.document()->model()).size();
  EXPECT_EQ(chart->familyPoints().size(), expected);
  EXPECT_EQ(chart->frontSeries()->name(), "recompute: best within budget");
  // The legend lists each entry whole, one a line on the right (along the
  // bottom a dozen did not fit and were elided).
  EXPECT_EQ(chart->chart()->legend()->alignment(), Qt::AlignRight);
  // sqrt and auto are one point on a chain, and the compressed sqrt variants
  // sit beside it: their labels would overlap, so the leftmost names them all
  // and the others show none. Every spec is named once, and no two shown
  // labels overlap where they were not merged.
  std::vector<const QScatterSeries*> labelled(chart->namedPoints().begin(), chart->namedPoints().end());
  labelled.insert(labelled.end(), chart->familyPoints().begin(), chart->familyPoints().end());
  QStringList shown;
  for (const QScatterSeries* s : labelled)
    if (!chart->shownLabel(s).isEmpty()) shown.push_back(chart->shownLabel(s));
  EXPECT_LT(shown.size(), static_cast<qsizetype>(labelled.size()));
  QStringList named;
  for (const QString& label : shown) named += label.split(", ");
  for (const QScatterSeries* s : labelled) {
    // A family's point is named by its spec (checked above), not its family.
    const bool family = std::find(chart->familyPoints().begin(), chart->familyPoints().end(), s) !=
                        chart->familyPoints().end();
    const QString own = family ? QString() : s->name();
    if (!own.isEmpty()) EXPECT_EQ(named.count(own) + named.count(own + " (0 %)"), 1) << own.toStdString();
  }
  EXPECT_TRUE(std::any_of(shown.begin(), shown.end(), [](const QString& l) {
    return l.contains("sqrt") && l.contains("auto") && l.contains(", ");
  })) << shown.join(" | ").toStdString();
  // A click on a family point compares and shows it.
  emit chart->pointClicked(parse_strategy("offload:2"));
  EXPECT_EQ(w.document()->current()->spec, "offload:2");
}
