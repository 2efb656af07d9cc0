// File › Open PyTorch snapshot: a memory snapshot recorded with
// torch.cuda.memory._record_memory_history / _dump_snapshot, read off the GUI
// thread (a snapshot can be hundreds of MB), then its active-memory curve drawn
// over the current strategy's predicted timeline, aligned on the forward and
// backward passes, with the peak difference explained (core/io/snapshot_compare.h,
// the same as `remat compare-snapshot`).
#pragma once
#include <QDialog>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "core/io/snapshot_compare.h"
#include "core/model/model.h"

QT_BEGIN_NAMESPACE
class QChartView;
class QLabel;
class QProgressBar;
class QPushButton;
QT_END_NAMESPACE

namespace remat {

class SnapshotDialog : public QDialog {
  Q_OBJECT
 public:
  // Starts reading `path` at once; the dialog shows progress until it is done.
  SnapshotDialog(const Model& model, const StrategyRun& run, const QString& path, QWidget* parent = nullptr);
  ~SnapshotDialog() override;

  // For tests: the comparison once read (nullopt while reading or after an error) and the error text.
  const std::optional<SnapshotComparison>& comparison() const { return result_; }
  QString error() const { return error_; }
  QChartView* chart() const { return chart_; }

 signals:
  void finishedReading();

 private:
  void show_result(SnapshotComparison c);
  void show_error(const QString& message);

  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::optional<SnapshotComparison> result_;
  QString error_;
  QProgressBar* busy_;
  QPushButton* cancel_;
  QLabel* text_;
  QChartView* chart_;
};

}  // namespace remat
