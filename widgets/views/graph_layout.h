// Where the graph's nodes sit, in scene units: forward ops along the top row
// in topological order, their backward steps in the row below, the loss at the
// right between the rows. Skip edges (residual blocks) become arcs. Also holds
// what the painter labels the nodes with (computed once per model).
#pragma once
#include <QPointF>
#include <QRectF>
#include <QStringList>
#include <vector>

#include "widgets/document/op_labels.h"

namespace remat {
struct Model;

class GraphLayout {
 public:
  static constexpr double kDx = 40;      // between consecutive ops
  static constexpr double kRow = 110;    // between the forward and the backward row
  static constexpr double kRadius = 12;  // node radius

  GraphLayout() = default;
  explicit GraphLayout(const Model& model);
  int size() const { return n_; }
  QPointF fwd(int op) const { return op == n_ - 1 ? QPointF(op * kDx, kRow / 2) : QPointF(op * kDx, 0); }
  QPointF bwd(int op) const { return op == n_ - 1 ? fwd(op) : QPointF(op * kDx, kRow); }
  QRectF bounds() const;  // nodes, labels and arcs, with a margin
  // Height of the arcs a skip edge draws above the forward row (and below the backward row).
  static double arcHeight(int span);
  // The op whose node contains `scene` (-1: none); `backward` tells which row.
  int opAt(QPointF scene, bool* backward) const;

  const QStringList& labels() const { return labels_; }          // node_label per op
  const QStringList& typeLabels() const { return typeLabels_; }  // empty when not worth drawing
  const std::vector<ModelBlock>& blocks() const { return blocks_; }

 private:
  int n_ = 0;
  double arcs_ = 0;  // the highest skip arc
  QStringList labels_, typeLabels_;
  std::vector<ModelBlock> blocks_;
};

}  // namespace remat
