// Where the graph's nodes sit, in scene units: forward ops along the top row
// in topological order, their backward steps in the row below, the loss at the
// right between the rows. Skip edges (residual blocks) become arcs. Also holds
// what the painter labels the nodes with (computed once per model).
#pragma once
#include <QPointF>
#include <QRectF>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "widgets/document/op_labels.h"

namespace remat {
struct Model;

class GraphLayout {
 public:
  static constexpr double kDx = 40;      // between consecutive ops
  static constexpr double kRow = 110;    // between the forward and the backward row
  static constexpr double kRadius = 12;  // node radius
  // A label line in scene units at text scale 1 (the painter's label font is
  // 0.8 radius: its line, 1.15 of it, is just under this).
  static constexpr double kLabelLine = 11.5;

  GraphLayout() = default;
  explicit GraphLayout(const Model& model);
  int size() const { return n_; }
  QPointF fwd(int op) const { return op == n_ - 1 ? QPointF(op * kDx, kRow / 2) : QPointF(op * kDx, 0); }
  QPointF bwd(int op) const { return op == n_ - 1 ? fwd(op) : QPointF(op * kDx, kRow); }
  // Nodes, labels and arcs, with a margin; `textScale` enlarges the label lines
  // (presentation mode's larger text keeps its room).
  QRectF bounds(double textScale = 1) const;
  // Height of the arcs a skip edge draws above the forward row (and below the backward row).
  static double arcHeight(int span);
  // The op whose node contains `scene` (-1: none); `backward` tells which row.
  int opAt(QPointF scene, bool* backward) const;

  const QStringList& labels() const { return labels_; }          // the first of labelForms per op
  // node_label_forms: the label, then its abbreviation (block prefix kept).
  const std::vector<QStringList>& labelForms() const { return forms_; }
  const QStringList& typeLabels() const { return typeLabels_; }  // empty when not worth drawing
  const std::vector<ModelBlock>& blocks() const { return blocks_; }
  // Ops the graph badges as simulate-only (marks_simulate_only), 1 per op.
  bool simulateOnly(int op) const { return !simOnly_.empty() && simOnly_[std::size_t(op)] != 0; }

 private:
  int n_ = 0;
  double arcs_ = 0;  // the highest skip arc
  QStringList labels_, typeLabels_;
  std::vector<QStringList> forms_;
  std::vector<uint8_t> simOnly_;
  std::vector<ModelBlock> blocks_;
};

}  // namespace remat
