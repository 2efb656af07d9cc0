#include "widgets/graph_layout.h"

#include <cmath>

#include "core/model.h"

namespace remat {

int GraphLayout::modelSize(const Model& model) { return model.size(); }

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
