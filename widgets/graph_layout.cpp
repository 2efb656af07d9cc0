#include "widgets/graph_layout.h"

#include <cmath>

#include "core/model.h"

namespace remat {

GraphLayout::GraphLayout(const Model& model) : n_(model.size()), blocks_(model_blocks(model)) {
  const bool types = shows_type_labels(model);
  for (int v = 0; v < n_; ++v) {
    labels_ << node_label(model, v);
    if (types) typeLabels_ << op_type_label(model, v);
  }
}

QRectF GraphLayout::bounds() const {
  const double w = std::max(0, n_ - 1) * kDx;
  return QRectF(-kDx, -kRow * 0.75, w + 2 * kDx, kRow * 2.5);
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
