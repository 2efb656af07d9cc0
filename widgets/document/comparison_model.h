// The comparison table: one row per strategy with the simulator's figures and,
// once a run has executed, the measured ones beside them. Strategies that
// offload fill the host peak and the time model's stall (empty for others).
#pragma once
#include <QAbstractTableModel>
#include <map>
#include <string>
#include <vector>

#include "core/analysis/comparison.h"
#include "widgets/document/run_list.h"
#include "widgets/document/measured_run.h"

namespace remat {
struct Model;

class ComparisonModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Strategy, Peak, Tensors, ForwardSteps, Recomputed, Overhead, HostPeak, Stall,
    MeasuredPeak, AllocatorPeak, ReservedPeak, Baseline, Time, Match, ColumnCount
  };
  explicit ComparisonModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}

  // `runs` must outlive the model's use of it (until the next setRuns).
  void setRuns(const Model* model, RunList runs);
  void setRuns(const Model* model, const std::vector<StrategyRun>* runs) { setRuns(model, RunList(*runs)); }
  void setMeasured(std::map<std::string, MeasuredRun> measured);
  const std::map<std::string, MeasuredRun>& measured() const { return measured_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  const Model* model_ = nullptr;
  RunList runs_;
  std::map<std::string, MeasuredRun> measured_;  // by spec
};

QString format_bytes(uint64_t bytes);
// "1.65 ms (1.60 to 1.72, 3 runs)": the median and the spread of the timed repeats.
QString time_spread_text(const MeasuredRun& m);
// "grad error 3.38e-02, loss error 0.00e+00": the Comparison tab's match cell of a compressed run.
QString compressed_error_text(const MeasuredRun& m);

}  // namespace remat
