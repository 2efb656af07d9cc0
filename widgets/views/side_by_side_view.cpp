#include "widgets/views/side_by_side_view.h"

#include <QMouseEvent>
#include <QPainter>
#include <algorithm>

#include "widgets/document/studio_document.h"

namespace remat {

SideBySideView::SideBySideView(StudioDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  setMinimumHeight(200);
  auto refresh = [this] { update(); };
  connect(doc_, &StudioDocument::modelChanged, this, [this] {
    layout_ = GraphLayout(doc_->model());
    update();
  });
  connect(doc_, &StudioDocument::stepChanged, this, refresh);
  connect(doc_, &StudioDocument::currentRunChanged, this, refresh);
  connect(doc_, &StudioDocument::runsChanged, this, refresh);
  layout_ = GraphLayout(doc_->model());
}

std::vector<int> SideBySideView::laneRuns() const {
  std::vector<int> out;
  for (int i = 0; i < doc_->runCount() && int(out.size()) < kMaxLanes; ++i)
    if (doc_->runs()[std::size_t(i)].ok()) out.push_back(i);
  const int cur = doc_->currentRun();
  if (doc_->current() && std::find(out.begin(), out.end(), cur) == out.end()) {
    if (int(out.size()) == kMaxLanes) out.pop_back();
    out.push_back(cur);
    std::sort(out.begin(), out.end());
  }
  return out;
}

std::vector<Lane> SideBySideView::lanes() const {
  std::vector<Lane> out;
  const RunList runs = doc_->runs();
  for (int r : laneRuns()) {
    const std::size_t step = r == doc_->currentRun() ? doc_->step() : doc_->stepAtPhase(r);
    out.push_back({&runs[std::size_t(r)], step, doc_->nodeStates(r, step)});
  }
  return out;
}

void SideBySideView::setFontScale(double scale) {
  fontScale_ = scale;
  update();
}

void SideBySideView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (layout_.size() != doc_->model().size()) layout_ = GraphLayout(doc_->model());
  const std::vector<Lane> l = lanes();
  p.fillRect(rect(), GraphPalette::background());
  paint_lanes(p, doc_->model(), layout_, l, QRectF(rect()), fontScale_, true, nullptr, doc_->legendMask());
}

void SideBySideView::mouseReleaseEvent(QMouseEvent* e) {
  const std::vector<int> runs = laneRuns();
  const int n = int(runs.size());
  for (int i = 0; i < n; ++i)
    if (lane_rect(QRectF(rect()), i, n, fontScale_, true, doc_->legendMask()).contains(e->position()))
      doc_->setCurrentRun(runs[std::size_t(i)]);
}

}  // namespace remat
