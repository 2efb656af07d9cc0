#include "widgets/views/graph_painter.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QStringList>
#include <algorithm>
#include <cmath>

#include "core/model/model.h"

namespace remat {
namespace {

constexpr double kLegendRow = 20;  // px at font scale 1
// Nodes at least this radius (px) get their labels (7 px type at least): side
// by side at 1400 x 900 the lanes' nodes are under 9 px, and were unlabelled.
constexpr double kLabelRadius = 7;
constexpr NodeLook kLegendOrder[] = {
    NodeLook::ActNotComputed, NodeLook::ActComputing, NodeLook::ActResident, NodeLook::ActCheckpoint,
    NodeLook::ActRecomputing, NodeLook::ActFreed,     NodeLook::ActOnHost,   NodeLook::ActFetching,
    NodeLook::ActCompressed,  NodeLook::ActEvicted,
    NodeLook::GradNotYet,     NodeLook::BwdRunning,   NodeLook::GradResident, NodeLook::GradFreed};
constexpr const char* kViewLegend = "view (owns no bytes)";

// A view aliases its input's storage and owns no bytes: a hollow ring in the
// colour of its state (a resident view's ring is filled-colour, a freed one pale).
void paint_view_node(QPainter& p, NodeLook look, QPointF c, double r) {
  const NodeStyle& st = node_style(look);
  p.save();
  p.setPen(QPen(st.filled ? st.fill : st.outline, std::max(2.0, r * 0.35), st.outlineStyle));
  p.setBrush(Qt::NoBrush);
  p.drawEllipse(c, r * 0.8, r * 0.8);
  p.restore();
}

// A simulate-only op: a dark diamond at the node's top right (no backend can
// run it; the tooltip says why).
void paintSimOnlyBadge(QPainter& p, QPointF c, double r) {
  const double h = std::max(3.5, r * 0.5);
  const QPointF at = c + QPointF(r * 0.8, -r * 0.8);
  QPolygonF d;
  d << at + QPointF(0, -h) << at + QPointF(h, 0) << at + QPointF(0, h) << at + QPointF(-h, 0);
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(QPen(Qt::white, std::max(1.0, r * 0.08)));
  p.setBrush(QColor(0x33, 0x33, 0x33));
  p.drawPolygon(d);
  p.restore();
}
constexpr const char* kSimOnlyLegend = "simulate-only (cannot run)";

bool inLegend(LegendMask mask, NodeLook look) { return (mask >> static_cast<int>(look)) & 1u; }

QFont pixelFont(const QPainter& p, double px, bool bold = false) {
  QFont f = p.font();
  f.setPixelSize(std::max(6, static_cast<int>(std::lround(px))));
  f.setBold(bold);
  return f;
}

// Draws `text` in `box` and reports it.
void text(QPainter& p, const QRectF& box, int flags, const QString& s, GraphPaintReport* report) {
  p.drawText(box, flags, s);
  if (report) report->texts.emplace_back(s, box);
}

// Legend items wrap onto as many rows as the width needs.
int legendRows(const QRectF& target, double fs, const QFont& font, LegendMask mask) {
  const QFontMetricsF fm(font);
  double x = 8;
  int rows = 1;
  for (const QString& label : legend_labels(mask)) {
    const double w = fm.horizontalAdvance(label) + 26 * fs;
    if (x + w > target.width() - 8 && x > 8) {
      ++rows;
      x = 8;
    }
    x += w;
  }
  return rows;
}

void paintLegend(QPainter& p, const QRectF& band, double fs, GraphPaintReport* report, LegendMask mask) {
  p.setFont(pixelFont(p, 11 * fs));
  const QFontMetricsF fm(p.font());
  const double row = kLegendRow * fs;
  double x = band.left() + 8, y = band.top();
  p.setRenderHint(QPainter::Antialiasing, true);
  // The looks in the mask, in the legend's order, then the view ring.
  std::vector<int> entries;
  for (std::size_t i = 0; i < std::size(kLegendOrder); ++i)
    if (inLegend(mask, kLegendOrder[i])) entries.push_back(int(i));
  if (mask & kViewLegendBit) entries.push_back(-1);
  if (mask & kSimulateOnlyLegendBit) entries.push_back(-2);
  for (int i : entries) {
    const QString label = i >= 0 ? QString(node_style(kLegendOrder[i]).legend) : i == -1 ? QString(kViewLegend)
                                                                                           : QString(kSimOnlyLegend);
    const double w = fm.horizontalAdvance(label) + 26 * fs;
    if (x + w > band.right() - 8 && x > band.left() + 8) {
      x = band.left() + 8;
      y += row;
    }
    const QPointF at(x + 7 * fs, y + row / 2);
    if (i >= 0) {
      paint_node(p, kLegendOrder[i], at, 6.5 * fs);
    } else if (i == -1) {
      paint_view_node(p, NodeLook::ActResident, at, 6.5 * fs);
    } else {
      paint_node(p, NodeLook::ActNotComputed, at, 6.5 * fs);
      paintSimOnlyBadge(p, at, 6.5 * fs);
    }
    p.setPen(QColor(40, 40, 40));
    text(p, QRectF(x + 17 * fs, y, w - 17 * fs, row), Qt::AlignLeft | Qt::AlignVCenter, label, report);
    x += w;
  }
}

constexpr double kSideHeader = 170;  // px at font scale 1: the least

// Title, then the readout on two lines, in a column at the left.
void paintSideHeader(QPainter& p, const QRectF& target, const GraphPaintOptions& o, GraphPaintReport* report) {
  const double fs = o.fontScale;
  const double w = std::min(side_header_width(o), target.width() * 0.45);
  double y = target.top() + 6;
  if (!o.title.isEmpty()) {
    // A title wider than the column (a long spec) wraps at its '+' and ','.
    p.setFont(pixelFont(p, 16 * fs, true));
    p.setPen(QColor(20, 20, 20));
    const QFontMetricsF fm(p.font());
    QString title = o.title;
    if (fm.horizontalAdvance(title) > w - 16) title.replace("+", "+\n").replace(",", ",\n");
    const double h = fm.height() * (title.count('\n') + 1);
    text(p, QRectF(target.left() + 12, y, w - 16, h), Qt::AlignLeft | Qt::AlignVCenter, title, report);
    y += h + 4;
  }
  if (o.readout.isEmpty()) return;
  // "resident 9 B · peak 9 B" -> "resident 9 B" / "peak 9 B".
  const QStringList parts = o.readout.split(" · ");
  p.setFont(pixelFont(p, 15 * fs, true));
  const double h = QFontMetricsF(p.font()).height();
  const QRectF box(target.left() + 8, y, w - 12, h * parts.size() + 6);
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(Qt::NoPen);
  p.setBrush(o.atPeak ? okabe_ito::vermillion() : QColor(255, 255, 255, 230));
  p.drawRoundedRect(box, 5 * fs, 5 * fs);
  p.setPen(o.atPeak ? QColor(Qt::white) : QColor(20, 20, 20));
  for (int i = 0; i < parts.size(); ++i)
    text(p, QRectF(box.left() + 6, box.top() + 3 + i * h, box.width() - 8, h), Qt::AlignLeft | Qt::AlignVCenter,
         parts[i], report);
  if (report) report->readout = box;
}

}  // namespace

double side_header_width(const GraphPaintOptions& o) {
  const double fs = o.fontScale;
  QFont title;
  title.setPixelSize(std::max(6, int(std::lround(16 * fs))));
  title.setBold(true);
  QFont readout = title;
  readout.setPixelSize(std::max(6, int(std::lround(15 * fs))));
  double w = kSideHeader * fs;
  // Wide enough for the readout's lines and the title's longest part.
  for (const QString& part : o.readout.split(" · ", Qt::SkipEmptyParts))
    w = std::max(w, QFontMetricsF(readout).horizontalAdvance(part) + 26);
  for (const QString& part : QString(o.title).replace(",", "+").split('+', Qt::SkipEmptyParts))
    w = std::max(w, QFontMetricsF(title).horizontalAdvance(part + "+") + 20);
  return w;
}

namespace {

void paintReadout(QPainter& p, const QRectF& target, const GraphPaintOptions& o, GraphPaintReport* report) {
  const double fs = o.fontScale;
  p.setFont(pixelFont(p, 20 * fs, true));
  const QFontMetricsF fm(p.font());
  const double w = fm.horizontalAdvance(o.readout) + 20 * fs, h = fm.height() + 8 * fs;
  const QRectF box(target.right() - w - 8, target.top() + 6, w, h);
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(Qt::NoPen);
  // At the peak the readout turns vermillion: the moment the classic figures point at.
  p.setBrush(o.atPeak ? okabe_ito::vermillion() : QColor(255, 255, 255, 230));
  p.drawRoundedRect(box, 6 * fs, 6 * fs);
  p.setPen(o.atPeak ? QColor(Qt::white) : QColor(20, 20, 20));
  text(p, box, Qt::AlignCenter, o.readout, report);
  if (report) report->readout = box;
}

// An arrow from the running node to a tensor it reads, curved off the row so
// it does not run along the edges.
void paintArrow(QPainter& p, QPointF from, QPointF to, double r, double bend) {
  const QPointF d = to - from;
  const double len = std::hypot(d.x(), d.y());
  if (len < 1e-6) return;
  const QPointF u = d / len, n(-u.y(), u.x());
  const QPointF ctrl = (from + to) / 2 + n * bend;
  // Start and end on the nodes' rims, along the curve's tangents.
  auto unit = [](QPointF v) { return v / std::max(1e-6, std::hypot(v.x(), v.y())); };
  const QPointF a = from + unit(ctrl - from) * r * 1.05;
  const QPointF b = to + unit(ctrl - to) * r * 1.45;
  QPainterPath path(a);
  path.quadTo(ctrl, b);
  const double width = std::max(1.4, r * 0.12);
  p.setPen(QPen(GraphPalette::arrow(), width, Qt::SolidLine, Qt::RoundCap));
  p.setBrush(Qt::NoBrush);
  p.drawPath(path);
  const QPointF t = unit(b - ctrl), tn(-t.y(), t.x());
  const double head = std::max(5.0, r * 0.55);
  QPainterPath tip(b);
  tip.lineTo(b - t * head + tn * head * 0.5);
  tip.lineTo(b - t * head - tn * head * 0.5);
  tip.closeSubpath();
  p.setPen(Qt::NoPen);
  p.setBrush(GraphPalette::arrow());
  p.drawPath(tip);
}

// The blocks as labelled groups (the overview of a large model): a bracket
// over each block's ops, the two rows' span shaded by block, and its name in
// the band between the rows, where the strips leave room.
void paintBlocks(QPainter& p, const GraphLayout& layout, const QTransform& t, const QRectF& target, double yTop,
                 double yLabel, double fs, GraphPaintReport* report) {
  p.setFont(pixelFont(p, 13 * fs, true));
  const QFontMetricsF fm(p.font());
  double lastRight = -1e9;
  const double half = GraphLayout::kDx / 2;
  for (const ModelBlock& b : layout.blocks()) {
    const double x0 = t.map(QPointF(b.first * GraphLayout::kDx - half, 0)).x();
    const double x1 = t.map(QPointF(b.last * GraphLayout::kDx + half, 0)).x();
    if (x1 < target.left() || x0 > target.right()) continue;
    p.setPen(QPen(QColor(120, 120, 120), 1));
    p.drawLine(QPointF(x0 + 1, yTop + 4), QPointF(x1 - 1, yTop + 4));
    p.drawLine(QPointF(x0 + 1, yTop + 4), QPointF(x0 + 1, yTop + 8));
    p.drawLine(QPointF(x1 - 1, yTop + 4), QPointF(x1 - 1, yTop + 8));
    // Labels never overlap: one that would touch the previous one is left out.
    const double w = fm.horizontalAdvance(b.name) + 4;
    const double cx = std::clamp((x0 + x1) / 2, target.left() + w / 2, target.right() - w / 2);
    const QRectF box(cx - w / 2, yLabel - fm.height() / 2, w, fm.height());
    if (box.left() < lastRight + 3) continue;
    p.setPen(QColor(40, 40, 40));
    text(p, box, Qt::AlignCenter, b.name, report);
    lastRight = box.right();
  }
}

QColor stripColor(NodeLook look) {
  const NodeStyle& s = node_style(look);
  return s.filled ? s.fill : look == NodeLook::ActFreed || look == NodeLook::GradFreed ? s.fill : QColor(Qt::white);
}

}  // namespace

std::vector<QString> legend_labels(LegendMask mask) {
  std::vector<QString> out;
  for (NodeLook look : kLegendOrder)
    if (inLegend(mask, look)) out.push_back(node_style(look).legend);
  if (mask & kViewLegendBit) out.push_back(kViewLegend);
  if (mask & kSimulateOnlyLegendBit) out.push_back(kSimOnlyLegend);
  return out;
}

double legend_height(double width, double fontScale, LegendMask mask) {
  QFont f;
  f.setPixelSize(std::max(6, static_cast<int>(std::lround(11 * fontScale))));
  return legendRows(QRectF(0, 0, width, 1), fontScale, f, mask) * kLegendRow * fontScale + 4;
}

void paint_legend(QPainter& p, const QRectF& band, double fontScale, GraphPaintReport* report, LegendMask mask) {
  p.save();
  paintLegend(p, band.adjusted(0, 2, 0, 0), fontScale, report, mask);
  p.restore();
}

QRectF graph_area(const QRectF& target, const GraphPaintOptions& o) {
  QRectF a = target;
  if (o.legend) a.setBottom(a.bottom() - legend_height(target.width(), o.fontScale, o.legendMask));
  if (!o.readout.isEmpty() || !o.title.isEmpty()) {
    if (o.sideHeader) a.setLeft(a.left() + std::min(side_header_width(o), target.width() * 0.45));
    else a.setTop(a.top() + 34 * o.fontScale);
  }
  return a;
}

QTransform fit_transform(const GraphLayout& layout, const QRectF& target, double maxScale) {
  const QRectF b = layout.bounds();
  // Long models shrink along x only: the rows keep their height so that the
  // zoomed-out strips stay readable.
  const double sy = std::min(target.height() / b.height(), maxScale);
  const double sx = std::min(target.width() / b.width(), sy);
  QTransform t;
  t.translate(target.center().x(), target.center().y());
  t.scale(sx, sy);
  t.translate(-b.center().x(), -b.center().y());
  return t;
}

QTransform fit_transform(const GraphLayout& layout, const QRectF& target, const GraphPaintOptions& o) {
  const QRectF b = layout.bounds(o.fontScale);
  const double sy = std::min(target.height() / b.height(), o.maxScale);
  // The spacing may grow wider than the rows' scale to fill the width (up to
  // stretchX): the nodes keep their size, the story spreads over the screen.
  const double sx = std::min(target.width() / b.width(), sy * o.stretchX);
  QTransform t;
  t.translate(target.center().x(), target.center().y());
  t.scale(sx, sy);
  t.translate(-b.center().x(), -b.center().y());
  return t;
}

void paint_graph(QPainter& p, const Model& model, const GraphLayout& layout, const NodeStates& states,
                 const QTransform& sceneToTarget, const QRectF& target, const GraphPaintOptions& o,
                 GraphPaintReport* report) {
  p.save();
  p.setClipRect(target);
  p.fillRect(target, GraphPalette::background());
  const int n = layout.size();
  const double fs = o.fontScale;
  if (n == 0 || static_cast<int>(states.fwd.size()) != n) {
    p.restore();
    return;
  }
  const QRectF area = graph_area(target, o);
  const double sx = std::abs(sceneToTarget.m11()), sy = std::abs(sceneToTarget.m22());
  const double scale = std::min(sx, sy);
  const double r = GraphLayout::kRadius * scale;  // node radius in target units
  const bool detailed = r >= 4;
  if (report) report->detailed = detailed;
  const QRectF scene = sceneToTarget.inverted().mapRect(area);
  // Draw only what is visible (plus a margin of ops for arcs entering from outside).
  const int margin = detailed ? 8 : 1;
  const int lo = std::clamp(static_cast<int>(std::floor(scene.left() / GraphLayout::kDx)) - margin, 0, n - 1);
  const int hi = std::clamp(static_cast<int>(std::ceil(scene.right() / GraphLayout::kDx)) + margin, 0, n - 1);
  auto fwdAt = [&](int v) { return sceneToTarget.map(layout.fwd(v)); };
  auto bwdAt = [&](int v) { return sceneToTarget.map(layout.bwd(v)); };
  p.save();
  p.setClipRect(area);

  if (!detailed) {
    // Level of detail: one strip per op and row, coloured by look; the model's
    // blocks are labelled above.
    p.setRenderHint(QPainter::Antialiasing, false);
    const double w = std::max(1.0, GraphLayout::kDx * sx);
    const double h = std::max(6.0, GraphLayout::kRow * sy * 0.4);  // bands, not dots
    // Each block a shaded group over both rows (alternating, so that
    // neighbours part), under the strips.
    int shade = 0;
    for (const ModelBlock& blk : layout.blocks()) {
      const double x0 = fwdAt(blk.first).x() - w / 2, x1 = fwdAt(blk.last).x() + w / 2;
      const double top = fwdAt(0).y() - h / 2 - 3, bottom = bwdAt(std::min(1, n - 1)).y() + h / 2 + 3;
      if (x1 >= area.left() && x0 <= area.right())
        p.fillRect(QRectF(x0 + 1, top, std::max(1.0, x1 - x0 - 2), bottom - top),
                   shade % 2 ? QColor(0xe4, 0xe8, 0xee) : QColor(0xee, 0xf0, 0xf4));
      ++shade;
    }
    for (int v = lo; v <= hi; ++v) {
      const QPointF f = fwdAt(v);
      const NodeLook fl = activation_look(states, v);
      QColor c = stripColor(fl);
      if (fl == NodeLook::ActCheckpoint) c = okabe_ito::black();
      p.fillRect(QRectF(f.x() - w / 2, f.y() - h / 2, w, h), c);
      if (fl == NodeLook::ActRecomputing && w >= 3)
        p.fillRect(QRectF(f.x() - w / 2, f.y() - h / 2, w, h), QBrush(Qt::white, Qt::BDiagPattern));
      if (fl == NodeLook::ActOnHost)  // on the host: the hatching, never the freed grey
        p.fillRect(QRectF(f.x() - w / 2, f.y() - h / 2, w, h), QBrush(okabe_ito::skyBlue(), Qt::DiagCrossPattern));
      if (layout.simulateOnly(v)) {  // simulate-only: a dark tick over its strip
        p.fillRect(QRectF(f.x() - w / 2, f.y() - h / 2 - 4, w, 3), QColor(0x33, 0x33, 0x33));
        if (report) report->simulateOnly.push_back(v);
      }
      if (v == n - 1) continue;
      const QPointF b = bwdAt(v);
      p.fillRect(QRectF(b.x() - w / 2, b.y() - h / 2, w, h), stripColor(gradient_look(states, v)));
    }
    if (o.marked >= 0 && o.marked < n) {
      // The find box's match: a triangle over its strip and a line through both rows.
      const QPointF f = fwdAt(o.marked), b = bwdAt(std::min(o.marked, n - 2));
      p.setRenderHint(QPainter::Antialiasing, true);
      p.setPen(QPen(okabe_ito::vermillion(), 2));
      p.drawLine(QPointF(f.x(), f.y() - h), QPointF(b.x(), b.y() + h));
      QPolygonF tri;
      tri << QPointF(f.x(), f.y() - h / 2 - 1) << QPointF(f.x() - 6, f.y() - h / 2 - 10) << QPointF(f.x() + 6, f.y() - h / 2 - 10);
      p.setBrush(okabe_ito::vermillion());
      p.drawPolygon(tri);
      p.setRenderHint(QPainter::Antialiasing, false);
    }
    p.setPen(QColor(90, 90, 90));
    p.setFont(pixelFont(p, 11 * fs));
    const QPointF f0 = fwdAt(0), b0 = sceneToTarget.map(QPointF(0, GraphLayout::kRow));
    const double left = std::max(area.left() + 4, f0.x());
    text(p, QRectF(left, b0.y() + h / 2 + 2, 600 * fs, 16 * fs), Qt::AlignLeft | Qt::AlignTop,
         layout.blocks().empty() ? "backward (zoom in for nodes)" : "backward (click a block to see its ops)", report);
    if (!layout.blocks().empty()) {
      paintBlocks(p, layout, sceneToTarget, area, f0.y() - h / 2 - 10, (f0.y() + b0.y()) / 2, fs, report);
    } else {
      text(p, QRectF(left, f0.y() - h / 2 - 18 * fs, 200 * fs, 16 * fs), Qt::AlignLeft | Qt::AlignBottom, "forward",
           report);
    }
  } else {
    p.setRenderHint(QPainter::Antialiasing, true);
    // Edges: forward above, backward (reversed) below; skips become arcs.
    p.setPen(QPen(QColor(160, 160, 160), std::max(0.6, 1.2 * scale)));
    p.setBrush(Qt::NoBrush);
    for (int v = lo; v <= hi; ++v) {
      for (int u : model.op(v).inputs) {
        const bool loss = v == n - 1;
        const double h = GraphLayout::arcHeight(v - u) * sy;
        const QPointF a = fwdAt(u), b = fwdAt(v);
        if (v - u == 1 || loss) {
          p.drawLine(a, b);
        } else {
          QPainterPath path(a);
          path.cubicTo(a + QPointF(0, -h), b + QPointF(0, -h), b);
          p.drawPath(path);
        }
        if (u == 0) continue;  // the input has no backward step
        const QPointF ba = bwdAt(u), bb = bwdAt(v);
        if (v - u == 1 || loss) {
          p.drawLine(bb, ba);
        } else {
          QPainterPath path(bb);
          path.cubicTo(bb + QPointF(0, h), ba + QPointF(0, h), ba);
          p.drawPath(path);
        }
      }
    }

    // What the running instruction reads: a halo under each tensor.
    const bool running = states.has_running && states.running.op >= 0 && states.running.op < n;
    auto centreOf = [&](const TensorRef& t) { return t.grad ? bwdAt(t.op) : fwdAt(t.op); };
    if (running && o.arrows) {
      p.setPen(Qt::NoPen);
      p.setBrush(GraphPalette::highlight());
      for (const TensorRef& t : states.reads) {
        const QPointF c = centreOf(t);
        if (t.grad) p.drawRect(QRectF(c.x() - r * 1.45, c.y() - r * 1.45, r * 2.9, r * 2.9));
        else p.drawEllipse(c, r * 1.45, r * 1.45);
      }
    }

    const QFont labelFont = pixelFont(p, std::max(7.0, r * 0.8) * fs);
    const QFontMetricsF fm(labelFont);
    const bool labels = r >= kLabelRadius;
    const double slot = GraphLayout::kDx * sx;  // between node centres, in target units
    const bool types = !layout.typeLabels().isEmpty();
    const auto& forms = layout.labelForms();
    // Names (or types) wider than an op's slot alternate between two heights.
    const bool stagger = labels && [&] {
      for (int v = lo; v <= hi; ++v)
        if (fm.horizontalAdvance(forms[std::size_t(v)].front()) > slot - 2 ||
            (types && fm.horizontalAdvance(layout.typeLabels()[v]) > slot - 2) ||
            (v != 0 && v != n - 1 && fm.horizontalAdvance("G(" + forms[std::size_t(v)].front() + ")") > slot - 2))
          return true;
      return false;
    }();
    const double labelWidth = stagger ? 2 * slot - 4 : slot - 2;
    const double line = fm.height();
    // A label is drawn whole or not at all (the tooltip names every node):
    // the first form that fits, then smaller type down to 60 %.
    auto drawFitted = [&](const QStringList& candidates, const QRectF& box, const QColor& colour) {
      // A label the view's edge would cut (a node half scrolled out) is left out.
      if (box.left() < area.left() - 0.5 || box.right() > area.right() + 0.5) return;
      for (double shrink : {1.0, 0.9, 0.8, 0.7, 0.6}) {
        QFont f = labelFont;
        f.setPixelSize(std::max(6, int(std::lround(labelFont.pixelSize() * shrink))));
        const QFontMetricsF m(f);
        for (const QString& c : candidates) {
          if (m.horizontalAdvance(c) > box.width()) continue;
          p.setFont(f);
          p.setPen(colour);
          text(p, box, Qt::AlignCenter, c, report);
          p.setFont(labelFont);
          return;
        }
      }
    };
    p.setFont(labelFont);
    for (int v = lo; v <= hi; ++v) {
      const QPointF c = fwdAt(v);
      const NodeLook fl = activation_look(states, v);
      if (model.op(v).view) paint_view_node(p, fl, c, r);
      else paint_node(p, fl, c, r);
      if (layout.simulateOnly(v)) {
        paintSimOnlyBadge(p, c, r);
        if (report) report->simulateOnly.push_back(v);
      }
      if (report) report->nodes.emplace_back(fl, c);
      if (labels) {
        double y = c.y() - r - 3;
        if (stagger && v % 2 == 1) y -= (types ? 2 : 1) * line;
        if (types) {
          drawFitted({layout.typeLabels()[v]}, QRectF(c.x() - labelWidth / 2, y - line, labelWidth, line),
                     QColor(110, 110, 110));
          y -= line;
        }
        drawFitted(forms[std::size_t(v)], QRectF(c.x() - labelWidth / 2, y - line, labelWidth, line),
                   QColor(30, 30, 30));
      }
      if (v == n - 1) {
        // The loss: its backward (the seed) shows as a ring.
        if (states.bwd[v] != BwdState::Pending) {
          const NodeStyle& st = node_style(states.bwd[v] == BwdState::Running ? NodeLook::BwdRunning : NodeLook::GradFreed);
          p.setPen(QPen(states.bwd[v] == BwdState::Running ? st.fill : QColor(150, 150, 150), std::max(2.0, r * 0.25),
                        st.outlineStyle));
          p.setBrush(Qt::NoBrush);
          p.drawEllipse(c, r * 1.3, r * 1.3);
        }
        continue;
      }
      if (v == 0) continue;
      const QPointF b = bwdAt(v);
      const NodeLook gl = gradient_look(states, v);
      paint_node(p, gl, b, r);
      if (report) report->nodes.emplace_back(gl, b);
      if (labels) {
        const double y = b.y() + r + 3 + (stagger && v % 2 == 1 ? line : 0);
        QStringList g;
        for (const QString& f : forms[std::size_t(v)]) g << "G(" + f + ")";
        g << forms[std::size_t(v)].back();  // the row is the gradients' row
        drawFitted(g, QRectF(b.x() - labelWidth / 2, y, labelWidth, line), QColor(60, 60, 60));
      }
    }
    if (o.marked >= 0 && o.marked < n) {
      // The find box's match: a wide ring round its circle and its square.
      p.setPen(QPen(okabe_ito::vermillion(), std::max(2.5, r * 0.3)));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(fwdAt(o.marked), r * 1.75, r * 1.75);
      if (o.marked != 0 && o.marked != n - 1) p.drawEllipse(bwdAt(o.marked), r * 1.75, r * 1.75);
    }
    if (running && o.arrows) {
      const Instr ins = states.running;
      const bool back = ins.kind == InstrKind::Bwd && ins.op != n - 1;
      const QPointF from = back ? bwdAt(ins.op) : fwdAt(ins.op);
      for (const TensorRef& t : states.reads) {
        const QPointF to = centreOf(t);
        if (std::hypot(to.x() - from.x(), to.y() - from.y()) < 1e-6) continue;  // its own G: the halo says it
        // Within a row the arrow bows away from the other row.
        const bool sameRow = std::abs(to.y() - from.y()) < r;
        // (The curve's normal is (-dy, dx): its y sign follows dx.)
        const double away = from.y() < bwdAt(std::min(ins.op, n - 2)).y() - r ? -1 : 1;
        const double bend = sameRow ? away * (to.x() > from.x() ? 1 : -1) *
                                          std::max(r * 1.6, 0.18 * std::abs(to.x() - from.x()))
                                    : 0.12 * std::hypot(to.x() - from.x(), to.y() - from.y());
        paintArrow(p, from, to, r, bend);
        if (report) ++report->arrows;
      }
    }
  }
  p.restore();

  if (o.sideHeader) {
    paintSideHeader(p, target, o, report);
  } else {
    if (!o.title.isEmpty()) {
      p.setFont(pixelFont(p, 15 * fs, true));
      p.setPen(QColor(20, 20, 20));
      text(p, QRectF(target.left() + 8, target.top() + 6, target.width() / 2, 26 * fs),
           Qt::AlignLeft | Qt::AlignVCenter, o.title, report);
    }
    if (!o.readout.isEmpty()) paintReadout(p, target, o, report);
  }
  if (o.legend) {
    const double h = legend_height(target.width(), fs, o.legendMask);
    paint_legend(p, QRectF(target.left(), target.bottom() - h, target.width(), h), fs, report, o.legendMask);
  }
  p.restore();
}

}  // namespace remat
