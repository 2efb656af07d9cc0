// Paints the graph at one step on any QPainter (the view, PNG and SVG
// exports). Only nodes inside `target` are drawn; when zoomed out the nodes
// become colour strips without outlines, labels or arcs (level of detail).
#pragma once
#include <QColor>
#include <QRectF>
#include <QTransform>

#include "widgets/graph_layout.h"
#include "widgets/node_states.h"

class QPainter;

namespace remat {
struct Model;

struct GraphPalette {
  static QColor notComputed() { return QColor(255, 255, 255); }
  static QColor live() { return QColor(74, 144, 217); }
  static QColor computing() { return QColor(245, 166, 35); }
  static QColor recomputing() { return QColor(194, 24, 91); }
  static QColor freed() { return QColor(224, 224, 224); }
  static QColor checkpointRing() { return QColor(20, 20, 20); }
  static QColor bwdRunning() { return QColor(208, 2, 27); }
  static QColor bwdDone() { return QColor(126, 190, 80); }
  static QColor gradLive() { return QColor(0, 160, 150); }
  static QColor background() { return QColor(250, 250, 248); }
};

// `sceneToTarget` maps layout coordinates to the painter's; `target` is the
// painted area in the painter's coordinates.
void paint_graph(QPainter& p, const Model& model, const GraphLayout& layout, const NodeStates& states,
                 const QTransform& sceneToTarget, const QRectF& target, bool legend = true);
// Scales and centres the whole layout into `target` (at most `maxScale`).
QTransform fit_transform(const GraphLayout& layout, const QRectF& target, double maxScale = 1.5);

}  // namespace remat
