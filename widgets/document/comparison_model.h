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

namespace remat {
struct Model;

// What the executor measured for one strategy (filled by the Run action).
struct MeasuredRun {
  QString backend; // what measured (Backend::name(): "cpu", "cuda: <device>")
  QString status;  // "ok", "out-of-memory", ...
  QString message; // why, when not ok
  uint64_t tracked_peak = 0;    // the executor's own count (== predicted)
  uint64_t allocator_peak = 0;  // the allocator's high-water mark, everything included
  uint64_t reserved_peak = 0;   // held from the system/driver at its high-water mark
  uint64_t baseline = 0;        // parameters, their gradients, target, loss
  double time_ms = 0;
  std::vector<double> run_ms;  // each timed repeat (time_ms is their median)
  float loss = 0;
  uint64_t grad_hash = 0;          // FNV-1a 64 of the parameter gradients (remat run's "grad hash")
  bool matches_reference = false;  // loss and every gradient byte identical to store-all's
  // A compressed strategy (ExecResult::compressed) is not expected to match:
  // its relative error against store-all instead (same_result.h's
  // relative_error, remat run's "relative_error").
  bool compressed = false;
  double loss_error = 0;
  double grad_error = 0;   // the largest over parameter tensors, L2 norm
  QString worst_param;     // the tensor it is of ("1.weight")
  std::vector<uint64_t> timeline;  // measured bytes per instruction (may be empty)
};

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
