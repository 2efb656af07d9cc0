#include "widgets/views/tradeoff_chart.h"

#include <QChart>
#include <QFontMetricsF>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QImage>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPainter>
#include <QPen>
#include <QScatterSeries>
#include <QSvgGenerator>
#include <QLogValueAxis>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "core/io/atomic_file.h"
#include "core/base/errors.h"
#include "widgets/document/strategy_colors.h"

namespace remat {
namespace {

// Spans wider than this get a logarithmic axis: recompute-all's overhead or
// peak would squash the others into a corner of a linear one.
constexpr double kLogRatio = 30;

// Bytes on the x axis read better in the largest unit that keeps values >= 1.
std::pair<double, QString> unit_for(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return {double(uint64_t{1} << 30), "GiB"};
  if (bytes >= (uint64_t{1} << 20)) return {double(uint64_t{1} << 20), "MiB"};
  if (bytes >= (uint64_t{1} << 10)) return {1024.0, "KiB"};
  return {1.0, "B"};
}

}  // namespace

TradeoffChart::TradeoffChart(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  // On the right, one entry a line: along the bottom a dozen entries
  // ("offload (checkpoints on the host)") did not fit and were elided.
  chart()->legend()->setAlignment(Qt::AlignRight);
  chart()->legend()->setShowToolTips(true);  // the whole name of one still elided
  connect(chart(), &QChart::plotAreaChanged, this, [this] { declutterLabels(); });
}

// A point label sits centred above its marker (Qt's drawSeriesPointLabels:
// baseline at half the marker plus 2 px above the point).
static QRectF label_rect(QChart* c, QScatterSeries* s, const QString& text) {
  const QPointF at = c->mapToPosition(s->at(0), s);
  const QFontMetricsF fm(s->pointLabelsFont());
  const double w = fm.horizontalAdvance(text);
  return {at.x() - w / 2, at.y() - s->markerSize() / 2 - 2 - fm.ascent(), w, fm.height()};
}

void TradeoffChart::declutterLabels() {
  QChart* c = chart();
  if (c->plotArea().isEmpty()) return;
  struct Placed {
    QScatterSeries* series;
    QString text;
    QRectF rect;
  };
  std::vector<Placed> placed;
  for (const auto& [series, text] : labels_) {
    series->setPointLabelsFormat(text);
    series->setPointLabelsVisible(true);
    const QRectF r = label_rect(c, series, text);
    auto hit = std::find_if(placed.begin(), placed.end(), [&](const Placed& p) { return p.rect.intersects(r); });
    if (hit == placed.end()) {
      placed.push_back({series, text, r});
      continue;
    }
    // Two labels on top of each other read as neither: the first names both.
    hit->text += ", " + text;
    hit->series->setPointLabelsFormat(hit->text);
    hit->rect = label_rect(c, hit->series, hit->text);
    series->setPointLabelsVisible(false);
    // The longer label may now reach another one: those merge too, until no
    // two shown labels touch ("revolve:4, sqrt+compress…" was drawn over "sqrt, auto").
    for (bool merged = true; merged;) {
      merged = false;
      for (std::size_t i = 0; i < placed.size() && !merged; ++i)
        for (std::size_t j = i + 1; j < placed.size() && !merged; ++j) {
          if (!placed[i].rect.intersects(placed[j].rect)) continue;
          Placed& keep = placed[i].rect.left() <= placed[j].rect.left() ? placed[i] : placed[j];
          Placed& gone = &keep == &placed[i] ? placed[j] : placed[i];
          keep.text += ", " + gone.text;
          keep.series->setPointLabelsFormat(keep.text);
          keep.rect = label_rect(c, keep.series, keep.text);
          gone.series->setPointLabelsVisible(false);
          placed.erase(placed.begin() + std::ptrdiff_t(&gone - placed.data()));
          merged = true;
        }
    }
  }
  // A label past the chart's right edge was clipped ("offload:2"): the x axis
  // grows until every label fits (once per layout).
  double over = 0;
  const double right = c->size().width() - 6;
  for (const Placed& p : placed) over = std::max(over, p.rect.right() - right);
  if (over > 0.5 && widenings_ < 4) {
    ++widenings_;
    if (auto* a = qobject_cast<QValueAxis*>(c->axes(Qt::Horizontal).value(0))) {
      const double perPixel = (a->max() - a->min()) / std::max(1.0, c->plotArea().width());
      a->setMax(a->max() + perPixel * (over + 8) * 1.3);
      declutterLabels();
    } else if (auto* l = qobject_cast<QLogValueAxis*>(c->axes(Qt::Horizontal).value(0))) {
      const double decades = std::log10(l->max() / l->min()) / std::max(1.0, c->plotArea().width());
      l->setMax(l->max() * std::pow(10.0, decades * (over + 8) * 1.3));
      declutterLabels();
    }
  }
}

QString TradeoffChart::shownLabel(const QScatterSeries* s) const {
  return s->pointLabelsVisible() ? s->pointLabelsFormat() : QString();
}

void TradeoffChart::setSweep(const QString& title, const SweepResult& r, const std::vector<FamilyPoint>& families) {
  QChart* c = chart();
  labels_.clear();  // before the series it points at go
  c->removeAllSeries();
  for (QAbstractAxis* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
  c->setTitle(families.empty() ? title + ": memory vs recompute overhead"
                               : title + ": memory vs step-time overhead (time model)");
  families_ = families;
  widenings_ = 0;
  namedSpecs_.clear();
  frontSpecs_.clear();

  uint64_t maxBytes = 1, minBytes = UINT64_MAX;
  double maxOverhead = 0.01, minOverhead = 1e300;  // the smallest positive one
  auto see = [&](uint64_t bytes, double overhead) {
    maxBytes = std::max(maxBytes, bytes);
    if (bytes > 0) minBytes = std::min(minBytes, bytes);
    maxOverhead = std::max(maxOverhead, overhead);
    if (overhead > 0) minOverhead = std::min(minOverhead, overhead);
  };
  for (const auto& p : r.budgets)
    if (p.feasible) see(p.budget, p.overhead);
  for (const auto& n : r.named) see(n.peak, n.overhead);
  for (const auto& f : families) see(f.peak, f.overhead);
  for (const auto& p : r.single_level)
    if (p.feasible) see(p.budget, p.overhead);
  const auto [unit, unitName] = unit_for(maxBytes);
  logX_ = minBytes != UINT64_MAX && double(maxBytes) / double(minBytes) > kLogRatio;
  logY_ = minOverhead < 1e300 && maxOverhead / minOverhead > kLogRatio;
  // On a log axis 0 % has no place: it sits on the axis floor (half the
  // smallest positive overhead) and its label says 0 %.
  const double yFloor = logY_ ? 100.0 * minOverhead / 2 : 0;
  auto yOf = [&](double overhead) { return std::max(100.0 * overhead, yFloor); };

  // Fixed colours for the staircase (Qt's theme gave it the colour of its
  // place among the series, which changed from model to model).
  front_ = new QLineSeries;
  front_->setName(families.empty() ? "best within budget" : "recompute: best within budget");
  front_->setPen(QPen(QColor(0x22, 0x22, 0x22), 2));
  frontPoints_ = new QScatterSeries;
  frontPoints_->setName("budgets");
  frontPoints_->setMarkerSize(7);
  frontPoints_->setColor(QColor(0x22, 0x22, 0x22));
  frontPoints_->setBorderColor(QColor(0x22, 0x22, 0x22));
  // A step line: the overhead holds until the next budget buys less.
  const SweepPoint* prev = nullptr;
  for (const auto& p : r.budgets) {
    if (!p.feasible) continue;
    const double x = double(p.budget) / unit, y = yOf(p.overhead);
    if (prev) front_->append(x, yOf(prev->overhead));
    front_->append(x, y);
    frontPoints_->append(x, y);
    frontSpecs_.push_back(p.spec);
    prev = &p;
  }
  single_ = nullptr;
  if (!r.single_level.empty()) {
    single_ = new QLineSeries;
    single_->setName("one level of checkpoints");
    single_->setPen(QPen(QColor(0x88, 0x88, 0x88), 1.6, Qt::DashLine));
    const SweepPoint* before = nullptr;
    for (const auto& p : r.single_level) {
      if (!p.feasible) continue;
      const double x = double(p.budget) / unit, y = yOf(p.overhead);
      if (before) single_->append(x, yOf(before->overhead));
      single_->append(x, y);
      before = &p;
    }
  }
  // One series per strategy: its label and legend entry name it (per-point
  // label formats need Qt 6.5; Debian 12 has 6.4).
  named_.clear();
  for (const auto& n : r.named) {
    auto* sp = new QScatterSeries;
    const QString spec = QString::fromStdString(n.spec.str());
    sp->setName(spec);
    sp->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    sp->setMarkerSize(10);
    sp->setColor(strategy_color(n.spec));  // as in the timeline and the panel
    sp->append(double(n.peak) / unit, yOf(n.overhead));
    sp->setPointLabelsVisible(true);
    sp->setPointLabelsClipping(false);
    sp->setPointLabelsFormat(logY_ && n.overhead == 0 ? spec + " (0 %)" : spec);
    connect(sp, &QXYSeries::clicked, this, [this, s = n.spec] { emit pointClicked(s); });
    named_.push_back(sp);
    namedSpecs_.push_back(n.spec);
  }
  // The other families: the marker says which, the label which spec.
  familySeries_.clear();
  for (QScatterSeries* sp : named_) labels_.emplace_back(sp, sp->pointLabelsFormat());
  std::vector<std::string> seen;
  for (const FamilyPoint& f : families) {
    auto* sp = new QScatterSeries;
    const QString spec = QString::fromStdString(f.spec.str());
    const TradeoffFamily* fam = nullptr;
    for (const TradeoffFamily& t : tradeoff_families())
      if (f.family == t.name) fam = &t;
    sp->setName(QString::fromStdString(f.family));
    sp->setMarkerShape(fam ? fam->shape : QScatterSeries::MarkerShapeCircle);
    sp->setMarkerSize(12);
    sp->setColor(strategy_color(f.spec));
    sp->setBorderColor(Qt::black);
    sp->append(double(f.peak) / unit, yOf(f.overhead));
    sp->setPointLabelsVisible(true);
    sp->setPointLabelsClipping(false);
    sp->setPointLabelsFormat(logY_ && f.overhead == 0 ? spec + " (0 %)" : spec);
    connect(sp, &QXYSeries::clicked, this, [this, s = f.spec] { emit pointClicked(s); });
    familySeries_.push_back(sp);
    labels_.emplace_back(sp, sp->pointLabelsFormat());
  }
  if (single_) c->addSeries(single_);
  c->addSeries(front_);
  c->addSeries(frontPoints_);
  for (auto* sp : named_) c->addSeries(sp);
  for (auto* sp : familySeries_) {
    c->addSeries(sp);
    // One legend entry per family.
    const bool first = std::find(seen.begin(), seen.end(), sp->name().toStdString()) == seen.end();
    seen.push_back(sp->name().toStdString());
    if (!first)
      for (QLegendMarker* m : c->legend()->markers(sp)) m->setVisible(false);
  }

  QAbstractAxis* ax = nullptr;
  QAbstractAxis* ay = nullptr;
  if (logX_) {
    auto* a = new QLogValueAxis;
    a->setBase(10);
    a->setLabelFormat("%g");
    a->setRange(double(minBytes) / unit / 1.3, double(maxBytes) / unit * 1.3);
    a->setMinorTickCount(-1);
    ax = a;
  } else {
    auto* a = new QValueAxis;
    a->setLabelFormat("%g");
    a->setRange(0, double(maxBytes) / unit * 1.05);
    a->applyNiceNumbers();
    ax = a;
  }
  ax->setTitleText("peak activation memory (" + unitName + (logX_ ? ", log scale)" : ")"));
  if (logY_) {
    auto* a = new QLogValueAxis;
    a->setBase(10);
    a->setLabelFormat("%g");
    a->setRange(yFloor / 1.3, 100.0 * maxOverhead * 1.3);
    a->setMinorTickCount(-1);
    ay = a;
  } else {
    auto* a = new QValueAxis;
    a->setLabelFormat("%g");
    a->setRange(0, 100.0 * maxOverhead * 1.1);
    a->applyNiceNumbers();
    ay = a;
  }
  // With other families the y axis is the time model's: for recomputation the same number.
  ay->setTitleText(QString(families.empty() ? "recompute overhead (%" : "step-time overhead (%")
                   + (logY_ ? ", log scale)" : ")"));
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  for (QAbstractSeries* s : c->series()) {
    s->attachAxis(ax);
    s->attachAxis(ay);
  }
  connect(frontPoints_, &QXYSeries::clicked, this, [this](const QPointF& pt) {
    for (int i = 0; i < frontPoints_->count(); ++i)
      if (frontPoints_->at(i) == pt) return emit pointClicked(frontSpecs_[std::size_t(i)]);
  });
  // Left to right, so a merged label starts with the leftmost point's name.
  std::stable_sort(labels_.begin(), labels_.end(), [](const auto& a, const auto& b) {
    return a.first->at(0).x() < b.first->at(0).x();
  });
  declutterLabels();
}

void save_tradeoff_chart(TradeoffChart& chart, const std::string& path) {
  const QString p = QString::fromStdString(path).toLower();
  const bool svg = p.endsWith(".svg");
  if (!svg && !p.endsWith(".png")) throw InputError("--plot: '" + path + "' must end in .png or .svg");
  const QSize size = chart.size().isValid() && !chart.size().isEmpty() ? chart.size() : QSize(1000, 600);
  // Lay the chart out at this size; a hidden view is never laid out (offscreen:
  // nothing appears on screen).
  const bool wasVisible = chart.isVisible();
  if (!wasVisible) {
    chart.setAttribute(Qt::WA_DontShowOnScreen);
    chart.resize(size);
    chart.show();
  }
  chart.chart()->resize(QSizeF(size));
  chart.chart()->layout()->activate();
  chart.declutterLabels();
  auto paint = [&](QPainter& painter) {
    painter.setRenderHint(QPainter::Antialiasing);
    chart.scene()->render(&painter, QRectF(QPointF(0, 0), QSizeF(size)), QRectF(QPointF(0, 0), QSizeF(size)));
  };
  replace_file_atomically(path, [&](const std::string& tmp) {
    if (svg) {
      QSvgGenerator gen;
      gen.setFileName(QString::fromStdString(tmp));
      gen.setSize(size);
      gen.setViewBox(QRect(QPoint(0, 0), size));
      QPainter painter(&gen);
      paint(painter);
      return painter.end();
    }
    QImage img(size, QImage::Format_ARGB32);
    img.fill(Qt::white);
    QPainter painter(&img);
    paint(painter);
    painter.end();
    return img.save(QString::fromStdString(tmp), "PNG");
  });
  if (!wasVisible) chart.hide();
}

}  // namespace remat
