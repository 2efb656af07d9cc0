#include "widgets/timeline_chart.h"

#include <QChart>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>

#include "widgets/comparison_model.h"
#include "widgets/timeline_downsample.h"

namespace remat {
namespace {
const QColor kColors[] = {QColor(31, 119, 180), QColor(214, 39, 40), QColor(44, 160, 44), QColor(148, 103, 189),
                          QColor(255, 127, 14), QColor(140, 86, 75),  QColor(227, 119, 194), QColor(23, 190, 207)};
}

TimelineChart::TimelineChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  auto* c = new QChart();
  c->legend()->setAlignment(Qt::AlignBottom);
  c->setMargins(QMargins(4, 4, 4, 4));
  setChart(c);
  ax_ = new QValueAxis;
  ax_->setTitleText(tr("step (instruction)"));
  ax_->setLabelFormat("%d");
  ay_ = new QValueAxis;
  ay_->setTitleText(tr("resident bytes"));
  ay_->setLabelFormat("%.0f");
  c->addAxis(ax_, Qt::AlignBottom);
  c->addAxis(ay_, Qt::AlignLeft);
  setMinimumHeight(180);
}

int TimelineChart::buckets() const {
  const int w = static_cast<int>(chart()->plotArea().width());
  return std::max(w > 10 ? w : width(), 50);
}

void TimelineChart::setRuns(const RunList& runs, const QString& title) {
  QChart* c = chart();
  c->removeAllSeries();  // deletes them
  series_.clear();
  measuredSeries_.clear();
  measuredTimelines_.clear();
  timelines_.clear();
  c->setTitle(title);
  std::size_t xmax = 1;
  ymax_ = 1;
  peaks_.clear();
  int i = 0;
  for (const StrategyRun& r : runs) {
    if (!r.ok()) continue;
    auto* s = new QLineSeries;
    s->setName(QString::fromStdString(r.name));
    s->setPen(QPen(kColors[i++ % 8], 1.6));
    timelines_.push_back(r.sim.timeline);
    series_.append(s);
    c->addSeries(s);
    s->attachAxis(ax_);
    s->attachAxis(ay_);
    xmax = std::max(xmax, r.sim.timeline.size());
    ymax_ = std::max(ymax_, double(r.sim.peak_bytes));
    auto* m = new QScatterSeries;
    m->setName(s->name() + tr(" peak"));
    m->setMarkerSize(9);
    m->setColor(s->pen().color());
    m->setBorderColor(Qt::black);
    m->setPointLabelsVisible(true);
    m->setPointLabelsClipping(false);
    m->setPointLabelsColor(s->pen().color().darker(140));
    m->setPointLabelsFormat(tr("%1 peak %2").arg(s->name(), format_bytes(r.sim.peak_bytes)));
    m->replace(QList<QPointF>{QPointF(double(r.sim.peak_index), double(r.sim.peak_bytes))});
    peaks_.append(m);
  }
  unit_ = 1;
  const char* unitName = "bytes";
  for (const char* name : {"KiB", "MiB", "GiB"}) {
    if (ymax_ / unit_ < 4096) break;
    unit_ *= 1024;
    unitName = name;
  }
  ay_->setTitleText(tr("resident %1").arg(unitName));
  for (auto* m : peaks_) {
    const QPointF p = m->at(0);
    m->replace(QList<QPointF>{QPointF(p.x(), p.y() / unit_)});
    c->addSeries(m);
    m->attachAxis(ax_);
    m->attachAxis(ay_);
    for (auto* lm : c->legend()->markers(m)) lm->setVisible(false);
  }
  cursor_ = new QLineSeries;
  cursor_->setName(tr("step"));
  cursor_->setPen(QPen(QColor(90, 90, 90), 1, Qt::DashLine));
  c->addSeries(cursor_);
  cursor_->attachAxis(ax_);
  cursor_->attachAxis(ay_);
  // Peaks and cursor need no legend entries.
  for (auto* m : c->legend()->markers(cursor_)) m->setVisible(false);
  ax_->setRange(0, double(xmax > 1 ? xmax - 1 : 1));
  ay_->setRange(0, ymax_ / unit_ * 1.12);
  ay_->setLabelFormat(unit_ == 1 ? "%.0f" : "%.1f");
  lastBuckets_ = 0;
  resample();
  setCursor(step_);
}

void TimelineChart::setMeasured(const std::map<std::string, std::vector<uint64_t>>& measured) {
  for (auto* s : measuredSeries_) {
    chart()->removeSeries(s);
    delete s;
  }
  measuredSeries_.clear();
  measuredTimelines_.clear();
  int i = 0;
  for (const auto& [spec, tl] : measured) {
    if (tl.empty()) continue;
    auto* s = new QLineSeries;
    s->setName(QString::fromStdString(spec) + tr(" (measured)"));
    QColor col = series_.isEmpty() ? kColors[i % 8] : series_[i % series_.size()]->pen().color();
    for (auto* p : series_)
      if (p->name().toStdString() == spec) col = p->pen().color();
    s->setPen(QPen(col.darker(130), 2.2, Qt::DotLine));
    chart()->addSeries(s);
    s->attachAxis(ax_);
    s->attachAxis(ay_);
    measuredSeries_.append(s);
    measuredTimelines_.push_back(tl);
    ++i;
  }
  lastBuckets_ = 0;
  resample();
}

void TimelineChart::resample() {
  const int b = buckets();
  if (b == lastBuckets_) return;
  lastBuckets_ = b;
  auto scaled = [this](QList<QPointF> pts) {
    if (unit_ != 1)
      for (QPointF& p : pts) p.setY(p.y() / unit_);
    return pts;
  };
  for (int i = 0; i < series_.size(); ++i)
    series_[i]->replace(scaled(downsample_minmax(timelines_[std::size_t(i)], b)));
  for (int i = 0; i < measuredSeries_.size(); ++i)
    measuredSeries_[i]->replace(scaled(downsample_minmax(measuredTimelines_[std::size_t(i)], b)));
}

void TimelineChart::setCursor(std::size_t step) {
  step_ = step;
  if (!cursor_) return;
  cursor_->replace(QList<QPointF>{QPointF(double(step), 0), QPointF(double(step), ymax_ / unit_ * 1.12)});
}

void TimelineChart::resizeEvent(QResizeEvent* e) {
  QChartView::resizeEvent(e);
  resample();
}

}  // namespace remat
