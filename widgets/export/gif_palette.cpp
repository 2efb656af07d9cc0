#include "widgets/export/gif_palette.h"

#include <QColor>
#include <algorithm>
#include <cmath>

#include "widgets/views/graph_painter.h"
#include "widgets/views/node_style.h"
#include "core/strategies/registry.h"
#include "widgets/document/strategy_colors.h"

namespace remat {
namespace {

QRgb blend(QRgb a, QRgb b, double t) {
  auto mix = [t](int x, int y) { return int(std::lround(x + (y - x) * t)); };
  return qRgb(mix(qRed(a), qRed(b)), mix(qGreen(a), qGreen(b)), mix(qBlue(a), qBlue(b)));
}

std::vector<QRgb> make() {
  std::vector<QRgb> base;
  auto add = [&](const QColor& c) {
    if (c.isValid()) base.push_back(c.rgb() | 0xff000000u);
  };
  for (int i = 0; i < int(NodeLook::Count); ++i) {
    const NodeStyle& s = node_style(NodeLook(i));
    add(s.fill);
    add(s.outline);
    add(s.patternColor);
  }
  for (const StrategyInfo& info : strategy_catalog()) add(strategy_color(info));
  add(GraphPalette::background());
  add(GraphPalette::highlight());
  add(GraphPalette::arrow());
  add(QColor(0xf1, 0xf3, 0xf6));  // the caption band
  std::vector<QRgb> out;
  auto put = [&](QRgb c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // Exact colours first, then the greys of text and lines.
  for (QRgb c : base) put(c);
  for (int g = 0; g <= 255; g += 15) put(qRgb(g, g, g));
  put(qRgb(250, 250, 248));
  // Edges: each colour toward white (the backgrounds) and toward black (outlines).
  for (double t : {0.2, 0.4, 0.6, 0.8, 0.9})
    for (QRgb c : base) {
      if (out.size() >= 250) break;
      put(blend(c, qRgb(250, 250, 248), t));
    }
  for (double t : {0.35, 0.65})
    for (QRgb c : base) {
      if (out.size() >= 256) break;
      put(blend(c, qRgb(0, 0, 0), t));
    }
  out.resize(std::min<std::size_t>(out.size(), 256));
  return out;
}

}  // namespace

const std::vector<QRgb>& animation_palette() {
  static const std::vector<QRgb> palette = make();
  return palette;
}

}  // namespace remat
