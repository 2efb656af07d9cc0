// Paints the graph at one step on any QPainter (the view, the side-by-side
// lanes, PNG/SVG/GIF exports): nodes in their looks (node_style.h), arrows from
// the running instruction to the tensors it reads, labels, the memory readout
// and the legend. Only nodes inside `target` are drawn; when zoomed out the
// nodes become colour strips under labelled block brackets (level of detail).
#pragma once
#include <QColor>
#include <QRectF>
#include <QString>
#include <QTransform>
#include <utility>
#include <vector>

#include "widgets/document/node_states.h"
#include "widgets/views/legend_looks.h"
#include "widgets/views/graph_layout.h"
#include "widgets/views/node_style.h"

class QPainter;

namespace remat {
struct Model;

struct GraphPalette {
  static QColor background() { return QColor(250, 250, 248); }
  static QColor highlight() { return okabe_ito::yellow(); }  // halo of the tensors read
  static QColor arrow() { return QColor(0x30, 0x30, 0x30); }
};

struct GraphPaintOptions {
  bool legend = true;
  LegendMask legendMask = kFullLegend;
  double fontScale = 1;  // slides and presentation mode: larger text
  QString readout;       // "resident 9 B · peak 9 B" at the top right; empty: none
  bool atPeak = false;   // the readout says so
  QString title;         // a side-by-side lane's strategy, top left
  bool arrows = true;
  // Title and readout in a column at the left instead of a band on top (the
  // wide, short side-by-side lanes).
  bool sideHeader = false;
  // Fitting (fit_transform's overload with options): the largest scale, and
  // how much wider than tall the spacing may grow to fill a wide area
  // (presentation mode and the side-by-side lanes fill the width).
  double maxScale = 1.5;
  double stretchX = 1;
  // A node to mark (the find box's match): a ring around both its nodes.
  int marked = -1;
};

// What was drawn, for tests and tooltips: every text with its box, the arrows,
// and each node's look and centre (detailed mode).
struct GraphPaintReport {
  bool detailed = false;
  std::vector<std::pair<QString, QRectF>> texts;
  int arrows = 0;
  std::vector<std::pair<NodeLook, QPointF>> nodes;
  QRectF readout;
  std::vector<int> simulateOnly;  // ops drawn with the simulate-only badge
};

// The part of `target` the nodes get (the legend and the title take the rest).
QRectF graph_area(const QRectF& target, const GraphPaintOptions& options);

// `sceneToTarget` maps layout coordinates to the painter's (fit it to
// graph_area); `target` is the whole painted area in the painter's coordinates.
void paint_graph(QPainter& p, const Model& model, const GraphLayout& layout, const NodeStates& states,
                 const QTransform& sceneToTarget, const QRectF& target, const GraphPaintOptions& options = {},
                 GraphPaintReport* report = nullptr);
// The legend alone (the side-by-side lanes share one): its height for a width,
// and its painting into a band of that height.
double legend_height(double width, double fontScale, LegendMask mask = kFullLegend);
void paint_legend(QPainter& p, const QRectF& band, double fontScale, GraphPaintReport* report = nullptr,
                  LegendMask mask = kFullLegend);
// The legend's labels for a mask, in their order.
std::vector<QString> legend_labels(LegendMask mask = kFullLegend);
// Scales and centres the whole layout into `area` (at most `maxScale`).
QTransform fit_transform(const GraphLayout& layout, const QRectF& area, double maxScale = 1.5);
// The same with the options' scale limit, text scale and stretch.
QTransform fit_transform(const GraphLayout& layout, const QRectF& area, const GraphPaintOptions& options);
// The width of the side header (title and readout, sideHeader) for these options.
double side_header_width(const GraphPaintOptions& options);

}  // namespace remat
