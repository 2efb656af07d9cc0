#include "widgets/graph_painter.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "core/model.h"

namespace remat {
namespace {

QColor fwdFill(FwdState s) {
  switch (s) {
    case FwdState::NotComputed: return GraphPalette::notComputed();
    case FwdState::Live: return GraphPalette::live();
    case FwdState::Computing: return GraphPalette::computing();
    case FwdState::Recomputing: return GraphPalette::recomputing();
    case FwdState::Freed: return GraphPalette::freed();
  }
  return Qt::white;
}

QColor bwdFill(BwdState s) {
  switch (s) {
    case BwdState::Pending: return GraphPalette::notComputed();
    case BwdState::Running: return GraphPalette::bwdRunning();
    case BwdState::Done: return GraphPalette::bwdDone();
  }
  return Qt::white;
}

void paintLegend(QPainter& p, const QRectF& target) {
  struct Item { QColor fill; QColor ring; const char* text; };
  const Item items[] = {
      {GraphPalette::notComputed(), Qt::gray, "not computed / pending"},
      {GraphPalette::live(), Qt::gray, "live"},
      {GraphPalette::live(), GraphPalette::checkpointRing(), "checkpoint"},
      {GraphPalette::computing(), Qt::gray, "computing"},
      {GraphPalette::recomputing(), Qt::gray, "recomputing"},
      {GraphPalette::freed(), Qt::gray, "freed"},
      {GraphPalette::bwdRunning(), Qt::gray, "backward running"},
      {GraphPalette::bwdDone(), Qt::gray, "backward done"},
      {GraphPalette::notComputed(), GraphPalette::gradLive(), "gradient live"},
      {QColor(Qt::transparent), Qt::gray, "view (owns no bytes)"},
  };
  QFont f = p.font();
  f.setPixelSize(11);
  p.setFont(f);
  const QFontMetrics fm(f);
  double x = target.left() + 8;
  const double y = target.top() + 8;
  for (const Item& it : items) {
    const double w = fm.horizontalAdvance(it.text) + 26;
    if (x + w > target.right()) break;
    const bool ring = it.ring != Qt::gray;
    p.setPen(QPen(it.ring, ring ? 2.5 : 1));
    p.setBrush(it.fill);
    p.drawEllipse(QPointF(x + 7, y + 7), 6, 6);
    p.setPen(QColor(40, 40, 40));
    p.drawText(QPointF(x + 17, y + 11), it.text);
    x += w;
  }
}

}  // namespace

QTransform fit_transform(const GraphLayout& layout, const QRectF& target, double maxScale) {
  const QRectF b = layout.bounds();
  // Long models shrink along x only: the rows keep their height so that the
  // zoomed-out strips stay readable.
  const double sy = std::min((target.height() - 30) / b.height(), maxScale);
  const double sx = std::min(target.width() / b.width(), sy);
  QTransform t;
  t.translate(target.center().x(), target.center().y() + 12);
  t.scale(sx, sy);
  t.translate(-b.center().x(), -b.center().y());
  return t;
}

void paint_graph(QPainter& p, const Model& model, const GraphLayout& layout, const NodeStates& states,
                 const QTransform& sceneToTarget, const QRectF& target, bool legend) {
  p.save();
  p.setClipRect(target);
  p.fillRect(target, GraphPalette::background());
  const int n = layout.size();
  if (n == 0 || static_cast<int>(states.fwd.size()) != n) {
    p.restore();
    return;
  }
  const double sx = std::abs(sceneToTarget.m11()), sy = std::abs(sceneToTarget.m22());
  const double scale = std::min(sx, sy);
  const double r = GraphLayout::kRadius * scale;  // node radius in target units
  const bool detailed = r >= 4;
  const QRectF scene = sceneToTarget.inverted().mapRect(target);
  // Draw only what is visible (plus a margin of ops for arcs entering from outside).
  const int margin = detailed ? 8 : 1;
  const int lo = std::clamp(static_cast<int>(std::floor(scene.left() / GraphLayout::kDx)) - margin, 0, n - 1);
  const int hi = std::clamp(static_cast<int>(std::ceil(scene.right() / GraphLayout::kDx)) + margin, 0, n - 1);
  p.setRenderHint(QPainter::Antialiasing, detailed);

  if (!detailed) {
    // Level of detail: one strip per op and row, coloured by state.
    const double w = std::max(1.0, GraphLayout::kDx * sx);
    const double h = std::max(6.0, GraphLayout::kRow * sy * 0.4);  // bands, not dots
    for (int v = lo; v <= hi; ++v) {
      const QPointF f = sceneToTarget.map(layout.fwd(v));
      const QColor c = states.checkpoint[v] && states.fwd[v] == FwdState::Live ? GraphPalette::checkpointRing()
                                                                                : fwdFill(states.fwd[v]);
      p.fillRect(QRectF(f.x() - w / 2, f.y() - h / 2, w, h), c);
      if (v == n - 1) continue;
      const QPointF b = sceneToTarget.map(layout.bwd(v));
      QColor bc = bwdFill(states.bwd[v]);
      if (states.grad_live[v]) bc = GraphPalette::gradLive();
      p.fillRect(QRectF(b.x() - w / 2, b.y() - h / 2, w, h), bc);
    }
    p.setPen(QColor(90, 90, 90));
    QFont f = p.font();
    f.setPixelSize(11);
    p.setFont(f);
    const QPointF f0 = sceneToTarget.map(layout.fwd(0)), b0 = sceneToTarget.map(QPointF(0, GraphLayout::kRow));
    p.drawText(QPointF(std::max(target.left() + 4, f0.x()), f0.y() - h / 2 - 4), "forward");
    p.drawText(QPointF(std::max(target.left() + 4, b0.x()), b0.y() + h / 2 + 14), "backward (zoom in for nodes)");
    if (legend) paintLegend(p, target);
    p.restore();
    return;
  }

  // Edges: forward above, backward (reversed) below; skips become arcs.
  const QPen edgePen(QColor(150, 150, 150), std::max(0.6, 1.2 * scale));
  p.setPen(edgePen);
  p.setBrush(Qt::NoBrush);
  for (int v = lo; v <= hi; ++v) {
    for (int u : model.op(v).inputs) {
      const QPointF a = sceneToTarget.map(layout.fwd(u));
      const QPointF b = sceneToTarget.map(layout.fwd(v));
      const bool loss = v == n - 1;
      if (v - u == 1 || loss) {
        p.drawLine(a, b);
      } else {
        const double h = std::min(GraphLayout::kRow * 0.6, 8.0 + 6.0 * (v - u)) * sy;
        QPainterPath path(a);
        path.cubicTo(a + QPointF(0, -h), b + QPointF(0, -h), b);
        p.drawPath(path);
      }
      if (u == 0) continue;  // the input has no backward step
      const QPointF ba = sceneToTarget.map(layout.bwd(u));
      const QPointF bb = sceneToTarget.map(layout.bwd(v));
      if (v - u == 1 || loss) {
        p.drawLine(bb, ba);
      } else {
        const double h = std::min(GraphLayout::kRow * 0.6, 8.0 + 6.0 * (v - u)) * sy;
        QPainterPath path(bb);
        path.cubicTo(bb + QPointF(0, h), ba + QPointF(0, h), ba);
        p.drawPath(path);
      }
    }
  }

  QFont font = p.font();
  font.setPixelSize(std::max(7, static_cast<int>(r * 0.8)));
  p.setFont(font);
  const bool labels = r >= 9;
  for (int v = lo; v <= hi; ++v) {
    const QPointF c = sceneToTarget.map(layout.fwd(v));
    const bool ckpt = states.checkpoint[v] && (states.fwd[v] == FwdState::Live || states.fwd[v] == FwdState::Computing);
    if (model.op(v).view) {
      // A view aliases its input's storage and owns no bytes: a hollow node,
      // its state shown by the ring's colour.
      p.setPen(QPen(ckpt ? GraphPalette::checkpointRing() : fwdFill(states.fwd[v]).darker(130), std::max(2.0, r * 0.35)));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(c, r * 0.8, r * 0.8);
    } else {
      p.setPen(ckpt ? QPen(GraphPalette::checkpointRing(), std::max(2.0, r * 0.28))
                    : QPen(QColor(110, 110, 110), 1, states.fwd[v] == FwdState::Freed ? Qt::DashLine : Qt::SolidLine));
      p.setBrush(fwdFill(states.fwd[v]));
      p.drawEllipse(c, r, r);
    }
    const std::string& name = model.op(v).name;
    if (labels) {
      p.setPen(QColor(50, 50, 50));
      const QString text = QString::fromStdString(name.empty() ? "op" + std::to_string(v) : name);
      p.drawText(QRectF(c.x() - GraphLayout::kDx * scale / 2, c.y() - r - font.pixelSize() - 4,
                        GraphLayout::kDx * scale, font.pixelSize() + 3),
                 Qt::AlignCenter, p.fontMetrics().elidedText(text, Qt::ElideRight, int(GraphLayout::kDx * scale)));
    }
    if (v == n - 1) {
      // The loss: its backward (the seed) shows as a ring.
      if (states.bwd[v] != BwdState::Pending) {
        p.setPen(QPen(bwdFill(states.bwd[v]), std::max(2.0, r * 0.25)));
        p.setBrush(Qt::NoBrush);
        p.drawEllipse(c, r * 1.3, r * 1.3);
      }
      continue;
    }
    if (v == 0) continue;
    const QPointF b = sceneToTarget.map(layout.bwd(v));
    p.setPen(states.grad_live[v] ? QPen(GraphPalette::gradLive(), std::max(2.0, r * 0.28)) : QPen(QColor(110, 110, 110), 1));
    p.setBrush(bwdFill(states.bwd[v]));
    p.drawRect(QRectF(b.x() - r, b.y() - r, 2 * r, 2 * r));
  }
  if (legend) paintLegend(p, target);
  p.restore();
}

}  // namespace remat
