// The memory–time trade-off of one model: the best recompute overhead per
// memory budget (a step line, the Pareto front from core/analysis/sweep.h)
// and the named strategies as labelled points in their fixed colours; on
// chains also the front with one level of checkpoints, so the gain of nesting
// them shows. An axis whose values span more than 30x is logarithmic.
// Beside recompute's staircase, the other families (tradeoff_families.h:
// offload, ...) as points in their own marker shape, one legend entry per
// family; the y axis is the step-time overhead, which for recomputation is
// the recompute overhead. Clicking a point or a front
// step emits its spec, so the window can add that strategy.
#pragma once
#include <QChartView>
#include <QString>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/sweep.h"
#include "widgets/views/tradeoff_families.h"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
QT_END_NAMESPACE

namespace remat {

class TradeoffChart : public QChartView {
  Q_OBJECT
 public:
  explicit TradeoffChart(QWidget* parent = nullptr);
  void setSweep(const QString& title, const SweepResult& result, const std::vector<FamilyPoint>& families = {});
  // One labelled series per family point, in the order given; only the
  // first of each family shows in the legend, named after the family.
  const std::vector<QScatterSeries*>& familyPoints() const { return familySeries_; }
  const std::vector<FamilyPoint>& familyData() const { return families_; }
  QLineSeries* frontSeries() const { return front_; }
  QScatterSeries* frontPoints() const { return frontPoints_; }
  // Chains: the front with one level of checkpoints (dashed), above or on the
  // nested one; null on other models.
  QLineSeries* singleLevelSeries() const { return single_; }
  // One labelled series per named strategy, in namedSpecs() order.
  const std::vector<QScatterSeries*>& namedPoints() const { return named_; }
  // Specs of namedPoints() and of frontPoints()' points, in order.
  const std::vector<StrategySpec>& namedSpecs() const { return namedSpecs_; }
  const std::vector<StrategySpec>& frontSpecs() const { return frontSpecs_; }
  // Whether an axis is logarithmic (its values span more than 30x).
  bool logX() const { return logX_; }
  bool logY() const { return logY_; }
  // The label drawn at a point (named or family): its spec, or, where labels
  // would overlap at the chart's size, the leftmost one names every spec
  // there ("sqrt, sqrt+compress:bf16") and the others show none (empty).
  QString shownLabel(const QScatterSeries* s) const;
  // Redoes that merging for the current layout (the chart does it whenever
  // its plot area changes).
  void declutterLabels();
  int widenings_ = 0;  // x axis widenings for labels since setSweep (at most 4)

 signals:
  void pointClicked(const StrategySpec& spec);

 private:
  QLineSeries* front_ = nullptr;
  QLineSeries* single_ = nullptr;
  QScatterSeries* frontPoints_ = nullptr;
  std::vector<QScatterSeries*> named_;
  std::vector<QScatterSeries*> familySeries_;
  std::vector<FamilyPoint> families_;
  std::vector<StrategySpec> namedSpecs_, frontSpecs_;
  std::vector<std::pair<QScatterSeries*, QString>> labels_;  // each labelled point and its own label
  bool logX_ = false, logY_ = false;
};

// Renders the chart at its current size to .png or .svg; the file appears
// whole or not at all (core/io/atomic_file.h). Throws InputError on a bad
// extension or an unwritable path.
void save_tradeoff_chart(TradeoffChart& chart, const std::string& path);

}  // namespace remat
