// The animated graph: paints the document's current run at the current step
// (graph_painter), zooms with the wheel, pans by dragging, and reports a click
// on a forward node so the window can toggle it as a checkpoint.
#pragma once
#include <QTransform>
#include <QWidget>

#include "widgets/graph_layout.h"
#include "widgets/node_states.h"

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

 signals:
  void nodeClicked(int op);

 protected:
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
  bool fitted_ = false;
  QPoint pressPos_, lastPos_;
  bool dragging_ = false;
};

}  // namespace remat
