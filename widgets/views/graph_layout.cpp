#include "widgets/views/graph_layout.h"

#include <cmath>

#include "core/model/model.h"

namespace remat {

double GraphLayout::arcHeight(int span) { return std::min(kRow * 0.6, 8.0 + 6.0 * span); }

GraphLayout::GraphLayout(const Model& model) : n_(model.size()), blocks_(model_blocks(model)) {
  const bool types = shows_type_labels(model);
  for (int v = 0; v + 1 < n_; ++v)
    for (int u : model.op(v).inputs)
      if (v - u > 1) arcs_ = std::max(arcs_, arcHeight(v - u));
  forms_ = node_label_forms(model);
  for (int v = 0; v < n_; ++v) {
    labels_ << forms_[std::size_t(v)].front();
    if (types) typeLabels_ << op_type_label(model, v);
  }
  bool any = false;
  std::vector<uint8_t> sim(std::size_t(n_), 0);
  for (int v = 0; v < n_; ++v) any |= (sim[std::size_t(v)] = marks_simulate_only(model, v)) != 0;
  if (any) simOnly_ = std::move(sim);
}

QRectF GraphLayout::bounds(double textScale) const {
  // Above the forward row: up to four label lines (type and name, staggered)
  // and the block brackets, or the skip arcs; below the backward row: its
  // labels (staggered) or the arcs.
  const double w = std::max(0, n_ - 1) * kDx;
  const double line = kLabelLine * textScale;
  const double labels = kRadius + (typeLabels_.isEmpty() ? 2 : 4) * line + (blocks_.empty() ? 4 : 16 * textScale);
  const double top = std::max(labels, arcs_ + 6);
  const double bottom = kRow + std::max(kRadius + 2 * line + 4, arcs_ + 6);
  return QRectF(-kDx, -top, w + 2 * kDx, top + bottom);
}

int GraphLayout::opAt(QPointF scene, bool* backward) const {
  const int op = static_cast<int>(std::lround(scene.x() / kDx));
  if (op < 0 || op >= n_) return -1;
  for (bool b : {false, true}) {
    const QPointF c = b ? bwd(op) : fwd(op);
    const QPointF d = scene - c;
    if (d.x() * d.x() + d.y() * d.y() <= kRadius * kRadius * 1.44) {
      if (backward) *backward = b && op != n_ - 1;
      return op;
    }
  }
  return -1;
}

}  // namespace remat
