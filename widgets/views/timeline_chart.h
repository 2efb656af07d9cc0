// The memory timeline: bytes per step of every strategy overlaid (downsampled
// per pixel with min/max buckets, updated with QXYSeries::replace), each in its
// fixed colour (strategy_colors.h) and its own dash so equal curves stay
// visible, its peak marked and named in the legend ("sqrt · peak 9 B"), round
// ticks in one byte unit, a cursor at the shown strategy's step and a dot on
// every curve at the same phase (the side-by-side lanes), measured timelines
// (from the Run action) dotted beside the predicted ones. A strategy that
// offloads has a second curve, its host bytes (dashed, its colour, "offload:4
// (host)"): device and host are two timelines; the steps where the time
// model predicts a stall (setStalls) carry a marker on its device curve.
// The x axis counts instructions, or each strategy's own length in percent
// (so recompute-all does not squash the others); drag to zoom, wheel to zoom,
// double-click to reset; a click seeks the shown strategy; hovering names the
// strategy, step and bytes under the pointer.
#pragma once
#include <QChartView>
#include <QList>
#include <map>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "core/sim/time_model.h"
#include "widgets/views/chart_scale.h"
#include "widgets/document/run_list.h"

QT_BEGIN_NAMESPACE
class QLegendMarker;
class QLineSeries;
class QRubberBand;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace remat {

class TimelineChart : public QChartView {
  Q_OBJECT
 public:
  enum class XMode { Steps, OwnLength };
  explicit TimelineChart(QWidget* parent = nullptr);
  void setRuns(const RunList& runs, const QString& title = {});
  // Measured bytes per instruction, by spec (empty map removes them).
  void setMeasured(const std::map<std::string, std::vector<uint64_t>>& measured);
  // The shown run (an index into the runs given) and its step: the cursor line.
  void setCursor(std::size_t step, int shownRun = -1);
  // The time model's stalls per spec (PreparedRun::stalls): a triangle on the
  // strategy's device curve at each stalled step, the total in the legend.
  void setStalls(const std::map<std::string, std::vector<Stall>>& stalls);
  // A dot on each run's curve at its step (by run index; SIZE_MAX: none).
  void setPhaseDots(const std::vector<std::size_t>& stepPerRun);

  // Text size relative to the window's (exports for slides).
  void setFontScale(double scale);
  void setXMode(XMode mode);
  XMode xMode() const { return xMode_; }
  // Zoom on x (in the axis' values); resetZoom() shows everything again.
  void zoomX(double from, double to);
  void resetZoom();
  double xMin() const;
  double xMax() const;

  // One predicted series per valid strategy, named "name · peak X".
  QList<QLineSeries*> strategySeries() const { return series_; }
  QList<QLineSeries*> measuredSeries() const { return measuredSeries_; }
  // Hollow rings along each measured curve (a measurement that equals the
  // prediction still shows as one), beside measuredSeries().
  QList<QScatterSeries*> measuredMarkers() const { return measuredMarks_; }
  // The legend below the plot when its entries fit there whole in a row,
  // else at the right, one a line, or name over peak on two lines where a
  // line would be wider than Qt gives the legend (Qt cuts entries that do
  // not fit; smaller type is the last resort).
  Qt::Alignment legendAlignment() const;
  // The width the legend's entries need in a row (bottom) or in a column (right).
  double legendRowWidth() const;
  double legendColumnWidth() const;
  // The legend's entries as Qt draws them now (an entry Qt had to cut ends
  // in "…"): what the tests and placeLegend check, not what was asked for.
  QStringList drawnLegendLabels() const;
  // Host bytes of each strategy that offloads, in run order ("name (host) · peak X").
  QList<QLineSeries*> hostSeries() const { return hostSeries_; }
  QList<QScatterSeries*> stallMarkers() const { return stallMarkers_; }
  QList<QScatterSeries*> peakMarkers() const { return peaks_; }
  QList<QScatterSeries*> phaseDots() const { return dots_; }
  QLineSeries* cursorSeries() const { return cursor_; }
  QValueAxis* axisX() const { return ax_; }
  QValueAxis* axisY() const { return ay_; }
  int buckets() const;
  // The y axis counts in unitBytes(): series hold bytes / unitBytes().
  double unitBytes() const { return unit_.bytes; }
  // "sqrt · step 38 · 9 B" (or "offload:4 (host) · step 12 · 3 B") for the
  // curve under a widget position; empty when none is within a few pixels.
  QString hoverText(QPointF pos) const;
  // The widget position of a run's point at `step` (tests and tooltips).
  QPointF positionOf(int run, std::size_t step) const;

 signals:
  // A click on the plot: the step of the shown strategy there.
  void stepClicked(std::size_t step);

 protected:
  void resizeEvent(QResizeEvent* e) override;
  bool event(QEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;

 private:
  struct Curve {
    int run;  // index into the runs given to setRuns
    std::string spec;
    QColor color;  // its strategy's
    std::vector<uint64_t> timeline;
  };
  void resample();
  void placeStallMarkers();
  void updateAxes();
  void placeLegend();
  void fitAxisTitles();
  QStringList xTitles_, yTitles_;  // each axis' title, long to short
  void placeLegendNow();
  // Breaks each entry's label into lines no wider than `width` (<= 0: one line).
  void wrapLegend(double width);
  // The markers of the entries the legend shows (the curves'), and their labels' widths.
  QList<QLegendMarker*> entryMarkers() const;
  std::vector<double> legendWidths() const;
  // Lays the chart out now and reads back whether Qt cut an entry.
  bool legendDrawnWhole();
  bool legendPending_ = false;
  double xOf(const Curve& c, std::size_t step) const;
  std::size_t stepOf(const Curve& c, double x) const;
  int seriesOfRun(int run) const;
  QPointF valueAt(QPointF widgetPos) const;

  std::vector<Curve> curves_, measured_, host_;
  QList<QLineSeries*> series_, measuredSeries_, hostSeries_;
  QList<QScatterSeries*> stallMarkers_, measuredMarks_;
  struct StalledRun {
    int run;
    std::vector<Stall> stalls;
  };
  std::vector<StalledRun> stalls_;  // beside stallMarkers_
  QList<QScatterSeries*> peaks_, dots_;
  QLineSeries* cursor_ = nullptr;
  QValueAxis* ax_ = nullptr;
  QValueAxis* ay_ = nullptr;
  QRubberBand* band_ = nullptr;
  XMode xMode_ = XMode::Steps;
  std::size_t step_ = 0;
  int shownRun_ = -1;
  std::vector<std::size_t> dotSteps_;
  double ymax_ = 1;
  ByteUnit unit_;
  double zoomFrom_ = 0, zoomTo_ = -1;  // to < from: not zoomed
  int lastBuckets_ = 0;
  int legendPixels_ = 11;  // the legend's type size before placeLegend shrinks it
  QPoint pressPos_;
  bool pressed_ = false;
};

}  // namespace remat
