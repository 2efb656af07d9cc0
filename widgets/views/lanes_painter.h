// Two or three strategies at one phase of the training step, stacked: each
// lane is the graph of one run with its name (in its strategy colour) and its
// memory readout; one legend below. The side-by-side view and the animation
// export paint through here.
#pragma once
#include <QRectF>
#include <QString>
#include <vector>

#include "widgets/views/graph_layout.h"
#include "widgets/views/graph_painter.h"
#include "widgets/document/node_states.h"

class QPainter;

namespace remat {
struct Model;
struct StrategyRun;

struct Lane {
  const StrategyRun* run = nullptr;
  std::size_t step = 0;
  NodeStates states;
};

// The rectangle of lane i of n in `target` (the legend band excluded).
QRectF lane_rect(const QRectF& target, int i, int n, double fontScale, bool legend, LegendMask mask = kFullLegend);
// "resident 9 B · peak 9 B" of a run at a step.
QString readout_of(const StrategyRun& run, std::size_t step);
void paint_lanes(QPainter& p, const Model& model, const GraphLayout& layout, const std::vector<Lane>& lanes,
                 const QRectF& target, double fontScale = 1, bool legend = true,
                 std::vector<GraphPaintReport>* reports = nullptr, LegendMask mask = kFullLegend,
                 bool fullLegendBand = false);
// fullLegendBand: the lanes keep the place of the full legend (lane_rect with
// kFullLegend) while only `mask`'s entries are drawn (the animation's frames).

}  // namespace remat
