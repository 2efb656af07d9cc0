// The Parallel tab: `remat simulate --parallel` drawn. One memory lane per
// pipeline stage (its activations over the schedule's slots above its model
// states, which its label gives, every lane on one scale) above the schedule as the
// papers draw it: a row per stage, a cell per pass and slot, forward,
// backward and weight-gradient passes in their own colours with the
// micro-batch's number inside. Lanes and grid share the slot axis, and each
// stage's peak slot is marked on both: a line in its lane, an outline
// around its cell. Cells are as wide as their numbers need and the tab
// scrolls sideways, so no text is cut.
#pragma once
#include <QColor>
#include <QRect>
#include <QString>
#include <QWidget>
#include <optional>
#include <vector>

#include "core/parallel/parallel_plan.h"

class QLabel;
class QScrollArea;

namespace remat {

class ParallelCanvas;

class ParallelView : public QWidget {
  Q_OBJECT
 public:
  explicit ParallelView(QWidget* parent = nullptr);
  void setReport(const ParallelReport& report);
  void setError(const QString& why);  // shown in place of the header; the last drawing stays
  const std::optional<ParallelReport>& report() const;

  // What is drawn, for the tests and the exporters: in canvas coordinates.
  struct Cell {
    int stage, slot;
    PassKind kind;
    int micro_batch, chunk;
    QRect rect;
    QColor fill;
  };
  struct Text {
    QString text;
    QRect box;  // the room it was given
  };
  int laneCount() const;
  QRect laneRect(int stage) const;
  const std::vector<Cell>& cells() const;
  const std::vector<Text>& texts() const;
  // Per stage: the slot marked as its peak in the lane (x of its line) and in the grid (the outlined cell).
  int lanePeakX(int stage) const;
  QRect gridPeakRect(int stage) const;
  QLabel* header() const { return header_; }
  QWidget* canvas() const;

 private:
  QLabel* header_;
  QScrollArea* scroll_;
  ParallelCanvas* canvas_;
};

}  // namespace remat
