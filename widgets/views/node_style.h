// How each state of a node looks. Fill means "in memory": an activation circle
// or a gradient square is filled while its tensor is resident, and every state
// differs by more than colour (pattern, outline, mark), with Okabe-Ito colours
// so that the picture survives colour-blindness and greyscale printing. The
// graph, the legend and the exports all paint nodes through paint_node().
#pragma once
#include <QColor>
#include <QPointF>
#include <QString>
#include <cstdint>

#include "widgets/document/node_states.h"

class QPainter;

namespace remat {

// Okabe & Ito (2008), "Color Universal Design".
namespace okabe_ito {
inline QColor black() { return QColor(0, 0, 0); }
inline QColor orange() { return QColor(0xE6, 0x9F, 0x00); }
inline QColor skyBlue() { return QColor(0x56, 0xB4, 0xE9); }
inline QColor bluishGreen() { return QColor(0x00, 0x9E, 0x73); }
inline QColor yellow() { return QColor(0xF0, 0xE4, 0x42); }
inline QColor blue() { return QColor(0x00, 0x72, 0xB2); }
inline QColor vermillion() { return QColor(0xD5, 0x5E, 0x00); }
inline QColor reddishPurple() { return QColor(0xCC, 0x79, 0xA7); }
}  // namespace okabe_ito

enum class NodeLook : uint8_t {
  // Activations (circles, forward row).
  ActNotComputed,  // white, thin outline
  ActResident,     // filled blue
  ActCheckpoint,   // filled blue, thick black ring
  ActComputing,    // filled orange, bold outline, a "forward" mark
  ActRecomputing,  // vermillion, hatched, bold outline
  ActFreed,        // pale grey, dashed outline: done and gone
  ActOnHost,       // sky-blue cross-hatching on white, dash-dot outline, a "down" mark: offloaded, kept on the host
  ActFetching,     // filled sky blue, bold outline, an "up" mark: back on the device, the copy landing
  ActCompressed,   // filled yellow, dotted blue outline, a small blue core: only C(v), a smaller copy, in memory
  ActEvicted,      // vermillion hatching on white, dotted vermillion outline: evicted by dtr, recomputed when read
  // Gradients and backward steps (squares, backward row).
  GradNotYet,      // white, thin outline
  GradResident,    // filled bluish green: G(v) in memory
  BwdRunning,      // reddish purple, bold outline, a "backward" mark
  GradFreed,       // pale grey, dashed outline, a tick: backward done, G(v) freed
  Count
};

enum class NodeMark : uint8_t { None, Forward, Backward, Tick, ToHost, FromHost, Packed };

struct NodeStyle {
  QColor fill;
  Qt::BrushStyle pattern;   // drawn over the fill (hatching)
  QColor patternColor;
  QColor outline;
  double outlineWidth;      // in node radii (scaled with the node)
  Qt::PenStyle outlineStyle;
  NodeMark mark;
  bool filled;              // "in memory" (or being made)
  const char* legend;
};

const NodeStyle& node_style(NodeLook look);
bool is_activation(NodeLook look);

// The look of op v's circle and of its square at these states.
NodeLook activation_look(const NodeStates& s, int v);
NodeLook gradient_look(const NodeStates& s, int v);

// Paints a node of radius r (the square's half side) centred at c.
void paint_node(QPainter& p, NodeLook look, QPointF c, double r);

}  // namespace remat
