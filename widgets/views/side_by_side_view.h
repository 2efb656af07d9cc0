// Side by side: the shown strategy and up to two more compared ones, each at
// the same phase of the training step (phase_map.h) as the shown one, so the
// O(n) / O(1) / O(sqrt n) story plays in one frame; the chart's dots mark the
// same moments. Clicking a lane shows that strategy in the graph.
#pragma once
#include <QWidget>
#include <vector>

#include "widgets/views/graph_layout.h"
#include "widgets/views/lanes_painter.h"

namespace remat {
class StudioDocument;

class SideBySideView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kMaxLanes = 3;
  explicit SideBySideView(StudioDocument* doc, QWidget* parent = nullptr);
  // The runs shown: the first valid compared ones, the shown run always among them.
  std::vector<int> laneRuns() const;
  std::vector<Lane> lanes() const;
  void setFontScale(double scale);
  QSize sizeHint() const override { return {900, 420}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent* e) override;

 private:
  StudioDocument* doc_;
  GraphLayout layout_;
  double fontScale_ = 1;
};

}  // namespace remat
