// The memory timeline: bytes per step of every strategy overlaid (downsampled
// per pixel with min/max buckets, updated with QXYSeries::replace), each
// peak marked and labelled, a cursor at the animation's step, and measured
// timelines (from the Run action) drawn dashed beside the predicted ones.
#pragma once
#include <QChartView>
#include <QList>
#include <map>
#include <string>
#include <vector>

#include "core/comparison.h"
#include "widgets/run_list.h"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace remat {

class TimelineChart : public QChartView {
  Q_OBJECT
 public:
  explicit TimelineChart(QWidget* parent = nullptr);
  void setRuns(const RunList& runs, const QString& title = {});
  // Measured bytes per instruction, by spec (empty map removes them).
  void setMeasured(const std::map<std::string, std::vector<uint64_t>>& measured);
  void setCursor(std::size_t step);
  // One predicted series per valid strategy, named by the strategy.
  QList<QLineSeries*> strategySeries() const { return series_; }
  QList<QLineSeries*> measuredSeries() const { return measuredSeries_; }
  // One labelled marker series per valid strategy, at its peak.
  QList<QScatterSeries*> peakMarkers() const { return peaks_; }
  QLineSeries* cursorSeries() const { return cursor_; }
  int buckets() const;
  // The y axis counts in B, KiB, MiB or GiB: series hold bytes / unitBytes().
  double unitBytes() const { return unit_; }

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void resample();
  std::vector<std::vector<uint64_t>> timelines_;
  std::vector<std::vector<uint64_t>> measuredTimelines_;
  QList<QLineSeries*> series_, measuredSeries_;
  QList<QScatterSeries*> peaks_;
  QLineSeries* cursor_ = nullptr;
  QValueAxis* ax_ = nullptr;
  QValueAxis* ay_ = nullptr;
  std::size_t step_ = 0;
  double ymax_ = 1;
  double unit_ = 1;
  int lastBuckets_ = 0;
};

}  // namespace remat
