// The animated graph: paints the document's current run at the current step
// (graph_painter) with the memory readout, zooms with the wheel, pans by
// dragging, shows a tooltip per node (op_labels), and reports a click on a
// forward node so the window can toggle it as a checkpoint.
#pragma once
#include <QTransform>
#include <QWidget>

#include "widgets/views/graph_layout.h"
#include "widgets/views/graph_painter.h"
#include "widgets/document/node_states.h"

namespace remat {
class StudioDocument;

class GraphView : public QWidget {
  Q_OBJECT
 public:
  explicit GraphView(StudioDocument* doc, QWidget* parent = nullptr);
  // Centre of a node in widget coordinates (for tests and tooltips).
  QPointF nodePosition(int op, bool backward = false) const;
  const QTransform& sceneTransform() const { return transform_; }
  void fitToView();
  void zoomBy(double factor, QPointF around);
  QSize sizeHint() const override { return {900, 320}; }
  // Text size for slides and presentation mode (1: normal).
  void setFontScale(double scale);
  double fontScale() const { return options().fontScale; }
  GraphPaintOptions options() const;
  // The tooltip at a widget position (empty: none), as the view shows it.
  QString toolTipAt(QPointF pos) const;
  // Marks `op` (the find box's match; -1: none) and scrolls it into the view,
  // zooming in until its nodes are drawn with labels.
  void markOp(int op);
  int markedOp() const { return marked_; }
  // Pans (keeping the zoom) so that `op`'s nodes are inside the view; false
  // when they already were.
  bool scrollTo(int op);
  // The widget x range the graph area shows and whether `op` lies in it.
  bool showsOp(int op) const;
  // The overview's click on a block: zooms so that block's ops fill the view.
  void expandBlock(int index);
  // Whether the nodes are drawn (else the overview's strips and blocks).
  bool detailed() const;

 signals:
  void nodeClicked(int op);

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;

 private:
  void refreshStates();
  StudioDocument* doc_;
  GraphLayout layout_;
  NodeStates states_;
  QTransform transform_;
  double fontScale_ = 1;
  bool fitted_ = false;
  QPoint pressPos_, lastPos_;
  bool dragging_ = false;
  int marked_ = -1;
};

}  // namespace remat
