// Chooses the strategies to compare: one row per entry of strategy_catalog(),
// a check box, its parameter (k, checkpoint list, budget ...) and whether it
// applies to this model (StrategyRun::error when it does not).
#pragma once
#include <QStringList>
#include <QWidget>
#include <vector>

#include "core/comparison.h"
#include "widgets/run_list.h"

class QTreeWidget;
class QTreeWidgetItem;

namespace remat {

class StrategyPanel : public QWidget {
  Q_OBJECT
 public:
  explicit StrategyPanel(QWidget* parent = nullptr);
  QStringList specs() const;
  // Checks the rows of `specs` and fills their parameters, without emitting.
  void setSpecs(const QStringList& specs);
  void setRuns(const RunList& runs);
  QTreeWidget* tree() const { return tree_; }

 signals:
  void specsChanged(const QStringList& specs);

 private:
  QString specOf(const QTreeWidgetItem* item) const;
  QTreeWidget* tree_;
  bool updating_ = false;
};

}  // namespace remat
