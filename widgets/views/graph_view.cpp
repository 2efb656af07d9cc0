#include "widgets/views/graph_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "widgets/document/op_labels.h"
#include "widgets/document/studio_document.h"

namespace remat {

GraphView::GraphView(StudioDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  setMinimumHeight(160);
  setMouseTracking(false);
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    layout_ = GraphLayout(doc_->model());
    fitted_ = false;
    fitToView();
  });
  connect(doc_, &StudioDocument::stepChanged, this, [this] { refreshStates(); });
  connect(doc_, &StudioDocument::currentRunChanged, this, [this] { refreshStates(); });
  connect(doc_, &StudioDocument::runsChanged, this, [this] { refreshStates(); });
  layout_ = GraphLayout(doc_->model());
  refreshStates();
}

GraphPaintOptions GraphView::options() const {
  GraphPaintOptions o;
  o.fontScale = fontScale_;
  o.readout = doc_->memoryReadout();
  o.atPeak = doc_->current() && doc_->residentBytes() == doc_->current()->sim.peak_bytes;
  return o;
}

void GraphView::setFontScale(double scale) {
  fontScale_ = scale;
  fitToView();
}

void GraphView::refreshStates() {
  if (layout_.size() != doc_->model().size()) layout_ = GraphLayout(doc_->model());
  states_ = doc_->nodeStates();
  update();
}

void GraphView::fitToView() {
  transform_ = fit_transform(layout_, graph_area(QRectF(rect()), options()));
  fitted_ = true;
  update();
}

void GraphView::resizeEvent(QResizeEvent*) {
  if (fitted_ || transform_.isIdentity()) fitToView();
}

QPointF GraphView::nodePosition(int op, bool backward) const {
  return transform_.map(backward ? layout_.bwd(op) : layout_.fwd(op));
}

void GraphView::zoomBy(double factor, QPointF around) {
  // x zooms by `factor`; y never gets smaller than the fitted height
  // (long models stay readable), and the point under `around` stays put.
  const QPointF scene = transform_.inverted().map(around);
  const double sx = transform_.m11() * factor;
  const double syFit = fit_transform(layout_, graph_area(QRectF(rect()), options())).m22();
  const double sy = std::max(sx, syFit);
  transform_ = QTransform(sx, 0, 0, sy, around.x() - scene.x() * sx, around.y() - scene.y() * sy);
  fitted_ = false;
  update();
}

void GraphView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paint_graph(p, doc_->model(), layout_, states_, transform_, QRectF(rect()), options());
}

QString GraphView::toolTipAt(QPointF pos) const {
  bool backward = false;
  const int op = layout_.opAt(transform_.inverted().map(pos), &backward);
  if (op < 0 || (backward && op == 0)) return {};
  QString tip = node_tooltip(doc_->model(), op, backward);
  const auto v = static_cast<std::size_t>(op);
  if (!backward && v < states_.fwd.size() && states_.fwd[v] == FwdState::Compressed)
    tip += "<br>" + compressed_note(doc_->model(), op, states_.packing[v]);
  return tip;
}

bool GraphView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = toolTipAt(he->pos());
    if (tip.isEmpty()) {
      QToolTip::showText(he->globalPos(),
                         tr("Click a forward node to toggle it as a checkpoint (manual strategy). Wheel: zoom, drag: pan."),
                         this);
    } else {
      QToolTip::showText(he->globalPos(), tip, this);
    }
    return true;
  }
  return QWidget::event(e);
}

void GraphView::wheelEvent(QWheelEvent* e) {
  zoomBy(std::pow(1.0015, e->angleDelta().y()), e->position());
  e->accept();
}

void GraphView::mousePressEvent(QMouseEvent* e) {
  pressPos_ = lastPos_ = e->pos();
  dragging_ = false;
}

void GraphView::mouseMoveEvent(QMouseEvent* e) {
  if (!(e->buttons() & Qt::LeftButton)) return;
  if ((e->pos() - pressPos_).manhattanLength() > 4) dragging_ = true;
  if (!dragging_) return;
  const QPoint d = e->pos() - lastPos_;
  lastPos_ = e->pos();
  transform_ = transform_ * QTransform::fromTranslate(d.x(), d.y());
  fitted_ = false;
  update();
}

void GraphView::mouseReleaseEvent(QMouseEvent* e) {
  if (dragging_ || e->button() != Qt::LeftButton) return;
  bool backward = false;
  const int op = layout_.opAt(transform_.inverted().map(QPointF(e->pos())), &backward);
  if (op >= 0 && !backward) emit nodeClicked(op);
}

}  // namespace remat
