#include "widgets/views/node_style.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

namespace remat {
namespace {

const QColor kPale(0xD0, 0xD0, 0xD0);  // freed: visibly not white, far from every fill
const QColor kThin(0x8C, 0x8C, 0x8C);

const NodeStyle kStyles[] = {
    {Qt::white, Qt::NoBrush, {}, kThin, 0.09, Qt::SolidLine, NodeMark::None, false, "not computed yet"},
    {okabe_ito::blue(), Qt::NoBrush, {}, QColor(0x20, 0x20, 0x20), 0.09, Qt::SolidLine, NodeMark::None, true,
     "in memory"},
    {okabe_ito::blue(), Qt::NoBrush, {}, okabe_ito::black(), 0.32, Qt::SolidLine, NodeMark::None, true,
     "checkpoint"},
    {okabe_ito::orange(), Qt::NoBrush, {}, okabe_ito::black(), 0.2, Qt::SolidLine, NodeMark::Forward, true,
     "computing"},
    {okabe_ito::vermillion(), Qt::BDiagPattern, Qt::white, okabe_ito::black(), 0.2, Qt::SolidLine, NodeMark::Forward,
     true, "recomputing"},
    {kPale, Qt::NoBrush, {}, kThin, 0.09, Qt::DashLine, NodeMark::None, false, "freed"},
    // Not in device memory, but not gone either: a hatched ghost of the
    // resident blue, so that it never reads as "freed".
    {Qt::white, Qt::DiagCrossPattern, okabe_ito::skyBlue(), okabe_ito::blue(), 0.14, Qt::DashDotLine,
     NodeMark::ToHost, false, "on host (offloaded)"},
    {okabe_ito::skyBlue(), Qt::NoBrush, {}, okabe_ito::black(), 0.2, Qt::SolidLine, NodeMark::FromHost, true,
     "fetching back"},
    // In memory, but smaller: a colour of its own and a small core in the
    // resident blue (the stored copy), so that it never reads as freed.
    {okabe_ito::yellow(), Qt::NoBrush, {}, okabe_ito::blue(), 0.14, Qt::DotLine, NodeMark::Packed, true,
     "compressed (stored smaller)"},
    // Gone from memory like a freed tensor (not filled), but hatched and
    // outlined in the recomputing colour: it comes back when it is read.
    {Qt::white, Qt::BDiagPattern, okabe_ito::vermillion(), okabe_ito::vermillion(), 0.14, Qt::DotLine,
     NodeMark::None, false, "evicted (recomputed when read)"},
    {Qt::white, Qt::NoBrush, {}, kThin, 0.09, Qt::SolidLine, NodeMark::None, false, "gradient not yet"},
    {okabe_ito::bluishGreen(), Qt::NoBrush, {}, QColor(0x20, 0x20, 0x20), 0.09, Qt::SolidLine, NodeMark::None, true,
     "gradient in memory"},
    {okabe_ito::reddishPurple(), Qt::NoBrush, {}, okabe_ito::black(), 0.2, Qt::SolidLine, NodeMark::Backward, true,
     "backward running"},
    {kPale, Qt::NoBrush, {}, kThin, 0.09, Qt::DashLine, NodeMark::Tick, false, "done, gradient freed"},
};
static_assert(sizeof(kStyles) / sizeof(kStyles[0]) == static_cast<std::size_t>(NodeLook::Count));

}  // namespace

const NodeStyle& node_style(NodeLook look) { return kStyles[static_cast<std::size_t>(look)]; }
bool is_activation(NodeLook look) { return look < NodeLook::GradNotYet; }

NodeLook activation_look(const NodeStates& s, int v) {
  const auto i = static_cast<std::size_t>(v);
  switch (s.fwd[i]) {
    case FwdState::NotComputed: return NodeLook::ActNotComputed;
    case FwdState::Computing: return NodeLook::ActComputing;
    case FwdState::Recomputing: return NodeLook::ActRecomputing;
    case FwdState::Freed: return NodeLook::ActFreed;
    case FwdState::OnHost: return NodeLook::ActOnHost;
    case FwdState::Fetching: return NodeLook::ActFetching;
    case FwdState::Compressed: return NodeLook::ActCompressed;
    case FwdState::Evicted: return NodeLook::ActEvicted;
    case FwdState::Live: return s.checkpoint[i] ? NodeLook::ActCheckpoint : NodeLook::ActResident;
  }
  return NodeLook::ActNotComputed;
}

NodeLook gradient_look(const NodeStates& s, int v) {
  const auto i = static_cast<std::size_t>(v);
  if (s.bwd[i] == BwdState::Running) return NodeLook::BwdRunning;
  if (s.grad_live[i]) return NodeLook::GradResident;
  return s.bwd[i] == BwdState::Done ? NodeLook::GradFreed : NodeLook::GradNotYet;
}

void paint_node(QPainter& p, NodeLook look, QPointF c, double r) {
  const NodeStyle& st = node_style(look);
  const bool circle = is_activation(look);
  const QRectF box(c.x() - r, c.y() - r, 2 * r, 2 * r);
  QPainterPath shape;
  if (circle) shape.addEllipse(box);
  else shape.addRect(box);
  p.save();
  p.setPen(Qt::NoPen);
  p.fillPath(shape, st.fill);
  if (st.pattern != Qt::NoBrush) {
    // Hatching sized to the node so it reads at every zoom.
    QBrush hatch(st.patternColor, st.pattern);
    hatch.setTransform(QTransform::fromScale(std::max(0.5, r / 8.0), std::max(0.5, r / 8.0)));
    p.fillPath(shape, hatch);
  }
  QPen pen(st.outline, std::max(1.0, st.outlineWidth * r), st.outlineStyle);
  pen.setJoinStyle(Qt::MiterJoin);
  p.setPen(pen);
  p.setBrush(Qt::NoBrush);
  p.drawPath(shape);
  // Marks: a play triangle pointing the way the pass goes, a tick when done.
  const QColor markColor = st.filled ? QColor(Qt::white) : QColor(0x50, 0x50, 0x50);
  const double m = r * 0.45;
  if (st.mark == NodeMark::Forward || st.mark == NodeMark::Backward) {
    const double dir = st.mark == NodeMark::Forward ? 1 : -1;
    QPainterPath tri;
    tri.moveTo(c + QPointF(dir * m, 0));
    tri.lineTo(c + QPointF(-dir * m * 0.7, -m));
    tri.lineTo(c + QPointF(-dir * m * 0.7, m));
    tri.closeSubpath();
    p.setPen(QPen(okabe_ito::black(), std::max(0.8, r * 0.06)));
    p.setBrush(markColor);
    p.drawPath(tri);
  } else if (st.mark == NodeMark::ToHost || st.mark == NodeMark::FromHost) {
    // An arrow down to the host or up from it, drawn like the pass marks.
    const double dir = st.mark == NodeMark::ToHost ? 1 : -1;
    QPainterPath arrow;
    arrow.moveTo(c + QPointF(0, dir * m));
    arrow.lineTo(c + QPointF(-m, -dir * m * 0.5));
    arrow.lineTo(c + QPointF(m, -dir * m * 0.5));
    arrow.closeSubpath();
    p.setPen(QPen(okabe_ito::black(), std::max(0.8, r * 0.06)));
    p.setBrush(st.filled ? markColor : okabe_ito::blue());
    p.drawPath(arrow);
  } else if (st.mark == NodeMark::Packed) {
    // The stored copy: a disc of about half the area inside the node.
    p.setPen(Qt::NoPen);
    p.setBrush(okabe_ito::blue());
    p.drawEllipse(c, m, m);
  } else if (st.mark == NodeMark::Tick) {
    p.setPen(QPen(markColor, std::max(1.2, r * 0.16), Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
    QPainterPath tick;
    tick.moveTo(c + QPointF(-m, 0));
    tick.lineTo(c + QPointF(-m * 0.25, m * 0.7));
    tick.lineTo(c + QPointF(m, -m * 0.7));
    p.drawPath(tick);
  }
  p.restore();
}

}  // namespace remat
