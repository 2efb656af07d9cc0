// The sweep over micro-batch counts (`remat simulate --micro-batches 1,2,4,8`)
// for the compared strategies: one row per K and strategy with the batch of
// one micro-batch, its activation peak, the whole step's memory and the
// step's FLOPs (K passes), from core/analysis/micro_batch_sweep.h. Computed in the
// background with progress; Cancel stops it, closing the dialog too.
#pragma once
#include <QDialog>
#include <QStringList>
#include <memory>
#include <vector>

#include "core/analysis/micro_batch_sweep.h"
#include "core/strategies/registry.h"
#include "widgets/controllers/job_tracker.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace remat {

// The Ks the window offers for a batch: 1 and every power of two dividing it
// (the CLI's example list 1,2,4,8 for a batch of 8), at most `most` of them.
std::vector<int> micro_batch_choices(int64_t batch, int most = 8);
// The first dimension of the model's input: what K must divide.
int64_t model_batch(const Model& model);

class MicroBatchDialog : public QDialog {
  Q_OBJECT
 public:
  MicroBatchDialog(std::shared_ptr<const Model> model, const std::vector<StrategyRequest>& specs, Optimizer optimizer,
                   const InstructionLimit& limit, QWidget* parent = nullptr);
  QTableWidget* table() const { return table_; }
  const std::vector<MicroBatchRow>& rows() const { return rows_; }
  bool running() const { return job_ != 0; }
  QString status() const;
  JobTracker* jobs() { return &jobs_; }

 signals:
  void computed();

 private:
  void fill();
  QLabel* status_;
  QTableWidget* table_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  std::vector<MicroBatchRow> rows_;
  int job_ = 0;
  JobTracker jobs_;  // last member: joined first
};

}  // namespace remat
