#include "widgets/views/timeline_chart.h"

#include <QChart>
#include <QFontInfo>
#include <QFontMetricsF>
#include <QTextDocumentFragment>
#include <QLegend>
#include <QGraphicsLayout>
#include <QHelpEvent>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QRubberBand>
#include <QScatterSeries>
#include <QTimer>
#include <QToolTip>
#include <QValueAxis>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "widgets/document/comparison_model.h"
#include "widgets/views/chart_texts.h"
#include "widgets/views/node_style.h"
#include "widgets/document/strategy_colors.h"
#include "widgets/views/timeline_downsample.h"

namespace remat {
namespace {
constexpr double kHeadroom = 1.06;  // above the highest peak
constexpr int kHoverPixels = 10;
}  // namespace

TimelineChart::TimelineChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  auto* c = new QChart();
  c->legend()->setAlignment(Qt::AlignBottom);
  c->setMargins(QMargins(4, 4, 4, 4));
  legendPixels_ = QFontInfo(c->legend()->font()).pixelSize();  // placeLegend shrinks from here
  setChart(c);
  ax_ = new QValueAxis;
  ax_->setLabelFormat("%g");
  ay_ = new QValueAxis;
  ay_->setLabelFormat("%g");
  c->addAxis(ax_, Qt::AlignBottom);
  c->addAxis(ay_, Qt::AlignLeft);
  setMinimumHeight(180);
  setMouseTracking(true);
  band_ = new QRubberBand(QRubberBand::Rectangle, this);
  setToolTip(tr("Click: show that step. Drag or wheel: zoom. Double-click: whole schedule."));
}

int TimelineChart::buckets() const {
  const int w = static_cast<int>(chart()->plotArea().width());
  return std::max(w > 10 ? w : width(), 50);
}

double TimelineChart::xOf(const Curve& c, std::size_t step) const {
  if (xMode_ == XMode::Steps) return double(step);
  return c.timeline.size() > 1 ? 100.0 * double(step) / double(c.timeline.size() - 1) : 0;
}

std::size_t TimelineChart::stepOf(const Curve& c, double x) const {
  if (c.timeline.empty()) return 0;
  const double s = xMode_ == XMode::Steps ? x : x / 100.0 * double(c.timeline.size() - 1);
  return static_cast<std::size_t>(std::clamp(std::llround(s), 0LL, static_cast<long long>(c.timeline.size() - 1)));
}

int TimelineChart::seriesOfRun(int run) const {
  for (std::size_t i = 0; i < curves_.size(); ++i)
    if (curves_[i].run == run) return int(i);
  return -1;
}

void TimelineChart::setRuns(const RunList& runs, const QString& title) {
  QChart* c = chart();
  c->removeAllSeries();  // deletes them
  series_.clear();
  measuredSeries_.clear();
  measuredMarks_.clear();
  hostSeries_.clear();
  stallMarkers_.clear();
  stalls_.clear();
  peaks_.clear();
  dots_.clear();
  curves_.clear();
  measured_.clear();
  host_.clear();
  c->setTitle(title);
  ymax_ = 1;
  uint64_t maxBytes = 1;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].ok()) maxBytes = std::max({maxBytes, runs[i].sim.peak_bytes, runs[i].sim.peak_host_bytes});
  unit_ = byte_unit(maxBytes);
  int k = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const StrategyRun& r = runs[i];
    if (!r.ok()) continue;
    const QString name = QString::fromStdString(r.name);
    const QColor color = strategy_color(r);
    auto* s = new QLineSeries;
    // The peak lives in the legend: labels on the plot would overlap.
    s->setName(QString("%1 · peak %2").arg(name, format_bytes(r.sim.peak_bytes)));
    // Earlier curves are wider, later ones dashed: an equal curve drawn over
    // another leaves it visible.
    s->setPen(QPen(color, std::max(1.6, 3.2 - 0.6 * k), curve_style(k)));
    curves_.push_back({int(i), r.spec, color, r.sim.timeline});
    series_.append(s);
    c->addSeries(s);
    s->attachAxis(ax_);
    s->attachAxis(ay_);
    ymax_ = std::max(ymax_, double(r.sim.peak_bytes));
    auto* m = new QScatterSeries;
    m->setName(name + tr(" peak"));
    m->setMarkerSize(10);
    m->setColor(color);
    m->setBorderColor(Qt::black);
    m->append(QPointF(double(r.sim.peak_index), double(r.sim.peak_bytes) / unit_.bytes));
    peaks_.append(m);
    auto* d = new QScatterSeries;
    d->setName(name + tr(" now"));
    d->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    d->setMarkerSize(8);
    d->setColor(Qt::white);
    d->setBorderColor(color);
    dots_.append(d);
    if (!r.sim.host_timeline.empty()) {
      // The host tier: the same colour, dashed thin, so the pair reads as one strategy.
      auto* h = new QLineSeries;
      h->setName(QString("%1 (host) · peak %2").arg(name, format_bytes(r.sim.peak_host_bytes)));
      h->setPen(QPen(color, 1.6, Qt::DashLine));
      host_.push_back({int(i), r.spec, color, r.sim.host_timeline});
      hostSeries_.append(h);
      c->addSeries(h);
      h->attachAxis(ax_);
      h->attachAxis(ay_);
      ymax_ = std::max(ymax_, double(r.sim.peak_host_bytes));
    }
    ++k;
  }
  for (auto* list : {&peaks_, &dots_})
    for (auto* m : *list) {
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
  for (auto* m : c->legend()->markers(cursor_)) m->setVisible(false);
  dotSteps_.clear();
  zoomTo_ = -1;
  placeLegend();
  updateAxes();
  setCursor(step_, shownRun_);
}

namespace {
// Qt Charts makes one tick item per interval of the range, at every change of
// either: a long schedule's range under the previous interval (1 step), or a
// zoom's interval under the whole range, would first create tens of
// thousands of them (the window froze for minutes opening chain:200 under
// recompute-all). Changed in the order that never has more ticks than the old
// or the new scale.
void set_ticks(QValueAxis* a, double lo, double hi, double interval) {
  a->setTickType(QValueAxis::TicksDynamic);
  a->setTickAnchor(0);
  if (interval < a->tickInterval()) {
    a->setRange(lo, hi);
    a->setTickInterval(interval);
  } else {
    a->setTickInterval(interval);
    a->setRange(lo, hi);
  }
}
}  // namespace

void TimelineChart::updateAxes() {
  // y: round ticks in one unit, named in the title.
  const NiceScale ys = nice_scale(ymax_ / unit_.bytes * kHeadroom, 6);
  set_ticks(ay_, 0, ys.top, ys.step);
  yTitles_ = {tr("resident (%1)").arg(unit_.name), unit_.name};
  // x: instructions or percent of each strategy's own length; zoomed or whole.
  double full = 1;
  for (const Curve& c : curves_) full = std::max(full, double(c.timeline.size() > 1 ? c.timeline.size() - 1 : 1));
  if (xMode_ == XMode::OwnLength) full = 100;
  const bool zoomed = zoomTo_ > zoomFrom_;
  const double lo = zoomed ? zoomFrom_ : 0, hi = zoomed ? zoomTo_ : full;
  const NiceScale xs = nice_scale(hi - lo, 8);
  set_ticks(ax_, lo, hi, std::max(xMode_ == XMode::Steps ? 1.0 : 0.0, xs.step));
  xTitles_ = xMode_ == XMode::Steps ? QStringList{tr("step (instruction)"), tr("step")}
                                    : QStringList{tr("% of each strategy's steps"), tr("% of steps")};
  fitAxisTitles();
  for (int i = 0; i < peaks_.size(); ++i) {
    const Curve& c = curves_[std::size_t(i)];
    const QPointF p = peaks_[i]->at(0);
    const auto peakStep = std::size_t(std::max_element(c.timeline.begin(), c.timeline.end()) - c.timeline.begin());
    peaks_[i]->replace(QList<QPointF>{QPointF(xOf(c, peakStep), p.y())});
  }
  lastBuckets_ = 0;
  resample();
  setCursor(step_, shownRun_);
  setPhaseDots(dotSteps_);
}

void TimelineChart::setMeasured(const std::map<std::string, std::vector<uint64_t>>& measured) {
  for (auto* s : measuredSeries_) {
    chart()->removeSeries(s);
    delete s;
  }
  for (auto* s : measuredMarks_) {
    chart()->removeSeries(s);
    delete s;
  }
  measuredSeries_.clear();
  measuredMarks_.clear();
  measured_.clear();
  for (const auto& [spec, tl] : measured) {
    if (tl.empty()) continue;
    // The run it measured, for its colour and its x scale.
    int run = -1;
    QColor colour(0x77, 0x77, 0x77);
    for (const Curve& c : curves_)
      if (c.spec == spec) run = c.run, colour = c.color;
    auto* s = new QLineSeries;
    s->setName(QString::fromStdString(spec) + tr(" (measured)"));
    // Its own look: a thin dark dotted line with hollow rings in the
    // strategy's colour, so that a measurement equal to the prediction (the
    // usual case) still reads as one on top of the solid predicted curve.
    s->setPen(QPen(colour.darker(170), 1.4, Qt::DotLine));
    chart()->addSeries(s);
    s->attachAxis(ax_);
    s->attachAxis(ay_);
    measuredSeries_.append(s);
    auto* rings = new QScatterSeries;
    rings->setName(s->name());
    rings->setMarkerShape(QScatterSeries::MarkerShapeCircle);
    rings->setMarkerSize(9);
    rings->setColor(QColor(255, 255, 255, 0));
    rings->setBorderColor(colour.darker(170));
    rings->setPen(QPen(colour.darker(170), 1.6));
    chart()->addSeries(rings);
    rings->attachAxis(ax_);
    rings->attachAxis(ay_);
    for (auto* lm : chart()->legend()->markers(rings)) lm->setVisible(false);
    measuredMarks_.append(rings);
    measured_.push_back({run, spec, colour, tl});
  }
  placeLegend();
  lastBuckets_ = 0;
  resample();
}

void TimelineChart::resample() {
  const int b = buckets();
  if (b == lastBuckets_) return;
  lastBuckets_ = b;
  const bool zoomed = zoomTo_ > zoomFrom_;
  auto points = [&](const Curve& c) {
    std::size_t from = 0, to = c.timeline.size();
    if (zoomed) {
      from = stepOf(c, zoomFrom_);
      to = std::min(c.timeline.size(), stepOf(c, zoomTo_) + 1);
    }
    QList<QPointF> pts = downsample_minmax(c.timeline, b, from, to);
    for (QPointF& p : pts) p = QPointF(xOf(c, std::size_t(p.x())), p.y() / unit_.bytes);
    return pts;
  };
  for (int i = 0; i < series_.size(); ++i) series_[i]->replace(points(curves_[std::size_t(i)]));
  for (int i = 0; i < measuredSeries_.size(); ++i) {
    const QList<QPointF> pts = points(measured_[std::size_t(i)]);
    measuredSeries_[i]->replace(pts);
    // About twenty rings, spread over the curve.
    QList<QPointF> rings;
    const qsizetype every = std::max<qsizetype>(1, pts.size() / 20);
    for (qsizetype k = every / 2; k < pts.size(); k += every) rings.append(pts[k]);
    measuredMarks_[i]->replace(rings);
  }
  for (int i = 0; i < hostSeries_.size(); ++i) hostSeries_[i]->replace(points(host_[std::size_t(i)]));
  placeStallMarkers();
}

void TimelineChart::setStalls(const std::map<std::string, std::vector<Stall>>& stalls) {
  for (auto* m : stallMarkers_) {
    chart()->removeSeries(m);
    delete m;
  }
  stallMarkers_.clear();
  stalls_.clear();
  for (const Curve& c : curves_) {
    const auto it = stalls.find(c.spec);
    if (it == stalls.end() || it->second.empty()) continue;
    double total = 0;
    for (const Stall& st : it->second) total += st.seconds;
    const QString name = series_[seriesOfRun(c.run)]->name().section(" · ", 0, 0);
    auto* m = new QScatterSeries;
    m->setName(tr("%1 stalls %2 over %3 step(s)")
                   .arg(name, QString::fromStdString(format_seconds(total)))
                   .arg(it->second.size()));
    m->setMarkerShape(QScatterSeries::MarkerShapeTriangle);
    m->setMarkerSize(11);
    m->setColor(okabe_ito::vermillion());
    m->setBorderColor(Qt::black);
    chart()->addSeries(m);
    m->attachAxis(ax_);
    m->attachAxis(ay_);
    stallMarkers_.append(m);
    stalls_.push_back({c.run, it->second});
  }
  placeLegend();
  placeStallMarkers();
}

void TimelineChart::placeStallMarkers() {
  for (int i = 0; i < stallMarkers_.size(); ++i) {
    const StalledRun& sr = stalls_[std::size_t(i)];
    const Curve& c = curves_[std::size_t(seriesOfRun(sr.run))];
    QList<QPointF> pts;
    for (const Stall& st : sr.stalls)
      if (st.instruction < c.timeline.size())
        pts.append(QPointF(xOf(c, st.instruction), double(c.timeline[st.instruction]) / unit_.bytes));
    stallMarkers_[i]->replace(pts);
  }
}

void TimelineChart::setCursor(std::size_t step, int shownRun) {
  step_ = step;
  if (shownRun >= 0) shownRun_ = shownRun;
  if (!cursor_) return;
  const int s = seriesOfRun(shownRun_);
  const double x = s >= 0 ? xOf(curves_[std::size_t(s)], step) : double(step);
  cursor_->replace(QList<QPointF>{QPointF(x, 0), QPointF(x, ay_->max())});
}

void TimelineChart::setPhaseDots(const std::vector<std::size_t>& stepPerRun) {
  dotSteps_ = stepPerRun;
  for (int i = 0; i < dots_.size(); ++i) {
    const Curve& c = curves_[std::size_t(i)];
    const std::size_t run = std::size_t(c.run);
    if (run >= stepPerRun.size() || stepPerRun[run] >= c.timeline.size()) {
      dots_[i]->clear();
      continue;
    }
    const std::size_t t = stepPerRun[run];
    dots_[i]->replace(QList<QPointF>{QPointF(xOf(c, t), double(c.timeline[t]) / unit_.bytes)});
  }
}

void TimelineChart::setFontScale(double scale) {
  QFont f = font();
  f.setPixelSize(std::max(6, int(std::lround(11 * scale))));
  for (QValueAxis* a : {ax_, ay_}) {
    a->setLabelsFont(f);
    QFont t = f;
    t.setBold(true);
    a->setTitleFont(t);
  }
  chart()->legend()->setFont(f);
  legendPixels_ = f.pixelSize();
  QFont title = f;
  title.setPixelSize(std::max(6, int(std::lround(14 * scale))));
  title.setBold(true);
  chart()->setTitleFont(title);
  placeLegend();
}

void TimelineChart::setXMode(XMode mode) {
  if (mode == xMode_) return;
  xMode_ = mode;
  zoomTo_ = -1;
  updateAxes();
}

void TimelineChart::zoomX(double from, double to) {
  if (to <= from) return;
  zoomFrom_ = from;
  zoomTo_ = to;
  updateAxes();
}

void TimelineChart::resetZoom() {
  zoomTo_ = -1;
  updateAxes();
}

double TimelineChart::xMin() const { return ax_->min(); }
double TimelineChart::xMax() const { return ax_->max(); }

QPointF TimelineChart::valueAt(QPointF pos) const {
  const QPointF scene = mapToScene(pos.toPoint());
  return chart()->mapToValue(chart()->mapFromScene(scene), series_.isEmpty() ? nullptr : series_.front());
}

QPointF TimelineChart::positionOf(int run, std::size_t step) const {
  const int s = seriesOfRun(run);
  if (s < 0 || step >= curves_[std::size_t(s)].timeline.size()) return {};
  const Curve& c = curves_[std::size_t(s)];
  const QPointF v(xOf(c, step), double(c.timeline[step]) / unit_.bytes);
  return mapFromScene(chart()->mapToScene(chart()->mapToPosition(v, series_[s])));
}

QString TimelineChart::hoverText(QPointF pos) const {
  if (series_.isEmpty() || !chart()->plotArea().contains(chart()->mapFromScene(mapToScene(pos.toPoint()))))
    return {};
  const double x = valueAt(pos).x();
  QString best;
  double bestDist = kHoverPixels;
  for (int i = 0; i < series_.size(); ++i) {
    const Curve& c = curves_[std::size_t(i)];
    const std::size_t t = stepOf(c, x);
    if (c.timeline.empty() || (xMode_ == XMode::Steps && x > double(c.timeline.size() - 1) + 0.5)) continue;
    const double d = std::abs(positionOf(c.run, t).y() - pos.y());
    if (d <= bestDist) {
      bestDist = d;
      best = QString("%1 · step %2 · %3")
                 .arg(series_[i]->name().section(" · ", 0, 0))
                 .arg(t + 1)
                 .arg(format_bytes(c.timeline[t]));
    }
  }
  // The host curves too: "offload:4 (host) · step 12 · 3 B" (a device curve as near wins).
  for (int i = 0; i < hostSeries_.size(); ++i) {
    const Curve& c = host_[std::size_t(i)];
    const std::size_t t = stepOf(c, x);
    if (c.timeline.empty() || (xMode_ == XMode::Steps && x > double(c.timeline.size() - 1) + 0.5)) continue;
    const QPointF v(xOf(c, t), double(c.timeline[t]) / unit_.bytes);
    const double d = std::abs(mapFromScene(chart()->mapToScene(chart()->mapToPosition(v, hostSeries_[i]))).y() - pos.y());
    if (d < bestDist) {
      bestDist = d;
      best = QString("%1 · step %2 · %3")
                 .arg(hostSeries_[i]->name().section(" · ", 0, 0))
                 .arg(t + 1)
                 .arg(format_bytes(c.timeline[t]));
    }
  }
  return best;
}

void TimelineChart::fitAxisTitles() {
  // The long titles where the chart draws them whole, else the short ones
  // (a low chart has no height for "resident (MiB)" beside its y axis).
  set_fitting_title(chart(), ax_, xTitles_);
  set_fitting_title(chart(), ay_, yTitles_);
}

void TimelineChart::resizeEvent(QResizeEvent* e) {
  QChartView::resizeEvent(e);
  placeLegend();
  resample();
}

bool TimelineChart::event(QEvent* e) {
  // Over a curve the tooltip is its step and bytes; the usage tip only elsewhere.
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = hoverText(QPointF(he->pos()));
    QToolTip::showText(he->globalPos(), tip.isEmpty() ? toolTip() : tip, this);
    return true;
  }
  return QChartView::event(e);
}

namespace {
// The lines of a legend label: a wrapped one ("sqrt<br>peak 9 B") is as wide
// as its longest line.
QStringList labelLines(const QString& label) {
  if (!label.contains("<br>")) return {label};
  return QTextDocumentFragment::fromHtml(label).toPlainText().replace(QChar::LineSeparator, '\n').split('\n');
}
// Qt's legend item: a marker, spacing and margins around its label.
constexpr double kLegendItemExtra = 30;
// Qt Charts gives a legend at the side at most 40 % of the chart's width
// (AbstractChartLayout's "golden ratio") and cuts longer entries; a little
// under it leaves room for the chart's own margins.
constexpr double kSideShare = 0.38;
}  // namespace

QList<QLegendMarker*> TimelineChart::entryMarkers() const {
  // The curves' entries; the peaks, dots, rings and cursor have none.
  QList<QLegendMarker*> out;
  for (const auto* list : {&series_, &hostSeries_, &measuredSeries_})
    for (QLineSeries* s : *list) out += chart()->legend()->markers(s);
  for (QScatterSeries* s : stallMarkers_) out += chart()->legend()->markers(s);
  return out;
}

std::vector<double> TimelineChart::legendWidths() const {
  const QFontMetricsF fm(chart()->legend()->font());
  std::vector<double> out;
  for (QLegendMarker* m : entryMarkers()) {
    double w = 0;
    for (const QString& line : labelLines(m->label())) w = std::max(w, fm.horizontalAdvance(line));
    out.push_back(w);
  }
  return out;
}

double TimelineChart::legendRowWidth() const {
  double w = 0;
  for (double x : legendWidths()) w += x + kLegendItemExtra;
  return w;
}

double TimelineChart::legendColumnWidth() const {
  double w = 0;
  for (double x : legendWidths()) w = std::max(w, x + kLegendItemExtra);
  return w;
}

QStringList TimelineChart::drawnLegendLabels() const { return drawn_texts(chart()->legend()); }

Qt::Alignment TimelineChart::legendAlignment() const { return chart()->legend()->alignment(); }

void TimelineChart::wrapLegend(double width) {
  // "sqrt · peak 9 B" becomes "sqrt" over "peak 9 B", and a line still wider
  // than `width` ("offload:4 stalls 4.47 ms over 7 step(s)") breaks between
  // words: narrower beside a narrow plot. The series keep their names (hover
  // text, tests). width <= 0: one line each again.
  const QFontMetricsF fm(chart()->legend()->font());
  for (QLegendMarker* m : entryMarkers()) {
    const QString name = m->series()->name();
    if (width <= 0) {
      m->setLabel(name);
      continue;
    }
    QStringList lines;
    for (const QString& part : name.split(" · ")) {
      QString line;
      for (const QString& word : part.split(' ')) {
        const QString longer = line.isEmpty() ? word : line + ' ' + word;
        if (!line.isEmpty() && fm.horizontalAdvance(longer) > width) {
          lines.append(line);
          line = word;
        } else {
          line = longer;
        }
      }
      lines.append(line);
    }
    for (QString& l : lines) l = l.toHtmlEscaped();
    m->setLabel(lines.size() > 1 ? lines.join("<br>") : name);
  }
}

bool TimelineChart::legendDrawnWhole() {
  // Now, not when the posted layout request arrives: the chart's layout
  // gives the legend its room, the legend's layout cuts the labels.
  chart()->legend()->layout()->invalidate();
  chart()->layout()->invalidate();
  chart()->layout()->activate();
  chart()->legend()->layout()->activate();
  const QStringList drawn = drawnLegendLabels();
  // Qt hides the entries (or the whole legend) that find no room at all.
  if (drawn.size() < entryMarkers().size()) return false;
  return std::none_of(drawn.begin(), drawn.end(), is_cut);
}

void TimelineChart::placeLegend() {
  placeLegendNow();
  fitAxisTitles();
  // Again once the legend has its markers and the view its size (both can
  // lag the call: the series' markers are made as the chart handles them).
  if (legendPending_) return;
  legendPending_ = true;
  QTimer::singleShot(0, this, [this] {
    legendPending_ = false;
    placeLegendNow();
    fitAxisTitles();
  });
}

void TimelineChart::placeLegendNow() {
  QLegend* legend = chart()->legend();
  const double room = width();  // the chart fills the view (its own size can lag a resize)
  QFont f = legend->font();
  f.setPixelSize(std::max(6, legendPixels_));
  legend->setFont(f);
  wrapLegend(0);
  if (entryMarkers().isEmpty() || legendRowWidth() == 0) return;  // the chart is being filled: decided later
  // Below the plot in one row when the entries fit there whole (Qt's row
  // never wraps: it cuts every entry instead).
  if (legendRowWidth() <= room - 16) {
    legend->setAlignment(Qt::AlignBottom);
    if (legendDrawnWhole()) return;
  }
  // Else at the right, one entry a line, or, where that column would take
  // more than Qt gives it, each entry on as many lines as it needs (name
  // over peak); the type gets smaller only after that, until Qt draws every
  // entry whole.
  legend->setAlignment(Qt::AlignRight);
  const double text = kSideShare * room - kLegendItemExtra;
  for (;;) {
    if (legendColumnWidth() > kSideShare * room) wrapLegend(text);
    if ((legendColumnWidth() <= kSideShare * room && legendDrawnWhole()) || f.pixelSize() <= 6) break;
    f.setPixelSize(f.pixelSize() - 1);
    legend->setFont(f);
    wrapLegend(0);
  }
}

void TimelineChart::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return QChartView::mousePressEvent(e);
  pressPos_ = e->pos();
  pressed_ = true;
  band_->setGeometry(QRect(pressPos_, QSize()));
}

void TimelineChart::mouseMoveEvent(QMouseEvent* e) {
  if (pressed_ && (e->pos() - pressPos_).manhattanLength() > 4) {
    const QRectF plot = chart()->mapToScene(chart()->plotArea()).boundingRect();
    const QRect r = mapFromScene(plot).boundingRect();
    band_->setGeometry(QRect(QPoint(std::min(pressPos_.x(), e->pos().x()), r.top()),
                             QPoint(std::max(pressPos_.x(), e->pos().x()), r.bottom())));
    band_->show();
    return;
  }
  const QString tip = hoverText(e->position());
  if (tip.isEmpty()) QToolTip::hideText();
  else QToolTip::showText(e->globalPosition().toPoint(), tip, this);
}

void TimelineChart::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !pressed_) return QChartView::mouseReleaseEvent(e);
  pressed_ = false;
  if (band_->isVisible()) {
    band_->hide();
    const double a = valueAt(QPointF(pressPos_)).x(), b = valueAt(e->position()).x();
    zoomX(std::max(std::min(a, b), 0.0), std::max(a, b));
    return;
  }
  const int s = seriesOfRun(shownRun_);
  if (s >= 0 && chart()->plotArea().contains(chart()->mapFromScene(mapToScene(e->pos()))))
    emit stepClicked(stepOf(curves_[std::size_t(s)], valueAt(e->position()).x()));
}

void TimelineChart::mouseDoubleClickEvent(QMouseEvent*) { resetZoom(); }

void TimelineChart::wheelEvent(QWheelEvent* e) {
  const double x = valueAt(e->position()).x();
  const double f = std::pow(0.999, e->angleDelta().y());
  const double lo = ax_->min(), hi = ax_->max();
  double full = 100;
  if (xMode_ == XMode::Steps)
    for (const Curve& c : curves_) full = std::max(full, double(c.timeline.size()));
  const double nlo = std::max(0.0, x - (x - lo) * f), nhi = std::min(full, x + (hi - x) * f);
  if (nhi - nlo < 4 || (nlo <= 0 && nhi >= full)) resetZoom();
  else zoomX(nlo, nhi);
  e->accept();
}

}  // namespace remat
