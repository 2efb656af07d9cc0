#include "widgets/views/lanes_painter.h"

#include <QPainter>

#include "core/analysis/comparison.h"
#include "widgets/document/comparison_model.h"
#include "widgets/document/strategy_colors.h"

namespace remat {

QRectF lane_rect(const QRectF& target, int i, int n, double fontScale, bool legend, LegendMask mask) {
  const double legendH = legend ? legend_height(target.width(), fontScale, mask) : 0;
  const double h = (target.height() - legendH) / std::max(1, n);
  return QRectF(target.left(), target.top() + i * h, target.width(), h);
}

QString readout_of(const StrategyRun& run, std::size_t step) {
  const uint64_t now = step < run.sim.timeline.size() ? run.sim.timeline[step] : 0;
  return QString("resident %1 · peak %2").arg(format_bytes(now), format_bytes(run.sim.peak_bytes));
}

void paint_lanes(QPainter& p, const Model& model, const GraphLayout& layout, const std::vector<Lane>& lanes,
                 const QRectF& target, double fontScale, bool legend, std::vector<GraphPaintReport>* reports,
                 LegendMask mask, bool fullLegendBand) {
  const LegendMask band = fullLegendBand ? kFullLegend : mask;
  const int n = static_cast<int>(lanes.size());
  if (reports) reports->assign(std::size_t(n), {});
  for (int i = 0; i < n; ++i) {
    const Lane& lane = lanes[std::size_t(i)];
    const QRectF r = lane_rect(target, i, n, fontScale, legend, band);
    GraphPaintOptions o;
    o.legend = false;
    o.fontScale = fontScale;
    o.title = QString::fromStdString(lane.run->name);
    o.sideHeader = true;
    o.readout = readout_of(*lane.run, lane.step);
    o.atPeak = lane.step < lane.run->sim.timeline.size() && lane.run->sim.timeline[lane.step] == lane.run->sim.peak_bytes;
    // The lanes are wide and short: the spacing grows to fill the width.
    o.stretchX = 3;
    paint_graph(p, model, layout, lane.states, fit_transform(layout, graph_area(r, o), o), r, o,
                reports ? &(*reports)[std::size_t(i)] : nullptr);
    // The lane's strategy colour on its left edge ties it to its chart curve.
    p.fillRect(QRectF(r.left(), r.top() + 4, 5, r.height() - 8), strategy_color(*lane.run));
    if (i > 0) {
      p.setPen(QPen(QColor(200, 200, 200), 1));
      p.drawLine(r.topLeft(), r.topRight());
    }
  }
  if (legend) {
    const double h = legend_height(target.width(), fontScale, band);
    p.fillRect(QRectF(target.left(), target.bottom() - h, target.width(), h), GraphPalette::background());
    paint_legend(p, QRectF(target.left(), target.bottom() - h, target.width(), h), fontScale,
                 reports && !reports->empty() ? &reports->back() : nullptr, mask);
  }
}

}  // namespace remat
