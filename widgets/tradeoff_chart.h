// The memory–time trade-off of one model: the best recompute overhead per
// memory budget (a step line, the Pareto front from core/analysis/sweep.h)
// and the named strategies as labelled points in their fixed colours; on
// chains also the front with one level of checkpoints, so the gain of nesting
// them shows. An axis whose values span more than 30x is logarithmic.
// Clicking a point or a front
// step emits its spec, so the window can add that strategy.
#pragma once
#include <QChartView>
#include <QString>
#include <string>
#include <vector>

#include "core/analysis/sweep.h"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
QT_END_NAMESPACE

namespace remat {

class TradeoffChart : public QChartView {
  Q_OBJECT
 public:
  explicit TradeoffChart(QWidget* parent = nullptr);
  void setSweep(const QString& title, const SweepResult& result);
  QLineSeries* frontSeries() const { return front_; }
  QScatterSeries* frontPoints() const { return frontPoints_; }
  // Chains: the front with one level of checkpoints (dashed), above or on the
  // nested one; null on other models.
  QLineSeries* singleLevelSeries() const { return single_; }
  // One labelled series per named strategy, in namedSpecs() order.
  const std::vector<QScatterSeries*>& namedPoints() const { return named_; }
  // Specs of namedPoints() and of frontPoints()' points, in order.
  const std::vector<QString>& namedSpecs() const { return namedSpecs_; }
  const std::vector<QString>& frontSpecs() const { return frontSpecs_; }
  // Whether an axis is logarithmic (its values span more than 30x).
  bool logX() const { return logX_; }
  bool logY() const { return logY_; }

 signals:
  void pointClicked(const QString& spec);

 private:
  QLineSeries* front_ = nullptr;
  QLineSeries* single_ = nullptr;
  QScatterSeries* frontPoints_ = nullptr;
  std::vector<QScatterSeries*> named_;
  std::vector<QString> namedSpecs_, frontSpecs_;
  bool logX_ = false, logY_ = false;
};

// Renders the chart at its current size to .png or .svg; the file appears
// whole or not at all (core/atomic_file.h). Throws InputError on a bad
// extension or an unwritable path.
void save_tradeoff_chart(TradeoffChart& chart, const std::string& path);

}  // namespace remat
