#include "widgets/document/comparison_model.h"

#include <algorithm>
#include <QBrush>
#include <QColor>

#include "core/model/model.h"
#include "core/sim/time_model.h"

namespace remat {

QString format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return QString("%1 B").arg(bytes);
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return QString("%1 %2").arg(v, 0, 'f', 2).arg(units[u]);
}

QString compressed_error_text(const MeasuredRun& m) {
  return QString("grad error %1, loss error %2").arg(m.grad_error, 0, 'e', 2).arg(m.loss_error, 0, 'e', 2);
}

void ComparisonModel::setRuns(const Model* model, RunList runs) {
  beginResetModel();
  model_ = model;
  runs_ = std::move(runs);
  measured_.clear();
  endResetModel();
}

void ComparisonModel::setMeasured(std::map<std::string, MeasuredRun> measured) {
  beginResetModel();
  measured_ = std::move(measured);
  endResetModel();
}

int ComparisonModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}
int ComparisonModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QString time_spread_text(const MeasuredRun& m) {
  const QString median = QString("%1 ms").arg(m.time_ms, 0, 'f', 2);
  if (m.run_ms.size() < 2) return median;
  const auto [lo, hi] = std::minmax_element(m.run_ms.begin(), m.run_ms.end());
  return QString("%1 (%2 to %3, %4 runs)").arg(median).arg(*lo, 0, 'f', 2).arg(*hi, 0, 'f', 2).arg(m.run_ms.size());
}

QVariant ComparisonModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  static const char* names[] = {"Strategy",      "Peak",           "Tensors",       "Fwd steps",
                                "Recomputed",    "Overhead",       "Host peak",     "Stall",
                                "Tracked peak",  "Allocator peak",
                                "Reserved peak", "Baseline",       "Time",          "Loss/grad match"};
  // What each column measures (the same words as docs/run.md).
  static const char* tips[] = {
      "The strategy's spec (remat simulate --strategy)",
      "Predicted peak: bytes of activations and activation gradients resident at once (simulator)",
      "Predicted peak in tensors, when every tensor has the same size",
      "Forward steps executed, recomputations included",
      "Forward steps beyond the first of each op",
      "Recomputed forward FLOPs over one forward plus one backward pass",
      "Offload: the most bytes on the host at once (activations moved off the device)",
      "Offload: time the compute waits for fetches that had not landed, by the time model (50 TFLOP/s, 25 GB/s "
      "host link: remat simulate --device-flops/--link-bandwidth), of the predicted step time",
      "Tracked peak: the executor's own count of the tensors it allocated, exactly bytes(v) each; equals the "
      "prediction (a bookkeeping check, not a measurement)",
      "Allocator peak: the allocator's own high-water mark of bytes in use during the run: baseline, tensors, "
      "scratch and workspaces, with its rounding (remat run shows it part by part)",
      "Reserved peak: bytes the allocator held from the system or the GPU driver at its high-water mark "
      "(in use plus cached for reuse)",
      "Baseline: parameters, their gradients, target/labels and the loss; the same for every strategy",
      "Median time of a training step over the timed runs, with the fastest and the slowest of them",
      "Loss and every gradient byte identical to store-all's on the same backend (remat run's 'same'; store-all runs as the reference when not chosen). "
      "A compressed strategy shows its relative error against store-all instead: the loss's |l - l_ref| / |l_ref| and the largest "
      "over parameter tensors of ||g - g_ref||2 / ||g_ref||2 (remat run's 'relative_error')"};
  if (role == Qt::DisplayRole) return QVariant(names[section]);
  if (role == Qt::ToolTipRole) {
    // The measured columns say on what, once something was measured.
    if (section >= MeasuredPeak && !measured_.empty())
      return QString("%1\nMeasured on %2").arg(tips[section], backend_label(measured_.begin()->second.backend));
    return QVariant(tips[section]);
  }
  return {};
}

QVariant ComparisonModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const StrategyRun& r = runs_[static_cast<std::size_t>(index.row())];
  const int col = index.column();
  if (role == Qt::ToolTipRole && !r.ok()) return QString::fromStdString(r.error);
  if (role == Qt::ToolTipRole && col == MeasuredPeak) {
    const auto it = measured_.find(r.spec);
    if (it != measured_.end() && !it->second.message.isEmpty()) return it->second.message;
  }
  if (role == Qt::ToolTipRole && col == Match) {
    const auto it = measured_.find(r.spec);
    if (it != measured_.end() && it->second.compressed && it->second.status == "ok")
      return QString("Compressed checkpoints: relative error against store-all. Gradients: the largest over parameter "
                     "tensors of ||g - g_ref||2 / ||g_ref||2 (at %1); loss: |l - l_ref| / |l_ref|. Exactly reproducible "
                     "run to run.")
          .arg(it->second.worst_param);
  }
  if (role == Qt::ForegroundRole && !r.ok()) return QBrush(r.pending ? QColor(90, 90, 90) : QColor(170, 30, 30));
  if (role == Qt::TextAlignmentRole && col != Strategy) return int(Qt::AlignRight | Qt::AlignVCenter);
  const bool edit = role == Qt::EditRole;  // raw numbers for sorting and tests
  if (role != Qt::DisplayRole && !edit) return {};
  if (col == Strategy) return QString::fromStdString(r.ok() ? r.name : r.spec);
  if (!r.ok())
    return col == Peak ? QVariant((r.pending ? "" : "invalid: ") + QString::fromStdString(r.error)) : QVariant();
  const Simulation& s = r.sim;
  const uint64_t unit = model_ ? model_->uniform_bytes() : 0;
  auto it = measured_.find(r.spec);
  const MeasuredRun* m = it == measured_.end() ? nullptr : &it->second;
  switch (col) {
    case Peak: return edit ? QVariant::fromValue<qulonglong>(s.peak_bytes) : QVariant(format_bytes(s.peak_bytes));
    case Tensors: return unit ? QVariant::fromValue<qulonglong>(s.peak_bytes / unit) : QVariant();
    case ForwardSteps: return QVariant::fromValue<qlonglong>(s.forward_steps);
    case Recomputed: return QVariant::fromValue<qlonglong>(s.recompute_steps);
    case Overhead: return edit ? QVariant(s.overhead) : QVariant(QString("%1%").arg(s.overhead * 100, 0, 'f', 1));
    case HostPeak:
      if (s.transfers == 0) return {};
      return edit ? QVariant::fromValue<qulonglong>(s.peak_host_bytes) : QVariant(format_bytes(s.peak_host_bytes));
    case Stall:
      if (!s.time.predicted) return {};
      return edit ? QVariant(s.time.stall_s)
                  : QVariant(QString("%1 of %2").arg(QString::fromStdString(format_seconds(s.time.stall_s)),
                                                     QString::fromStdString(format_seconds(s.time.step_s))));
    case MeasuredPeak:
      if (!m) return {};
      if (m->status != "ok") return m->status;
      return edit ? QVariant::fromValue<qulonglong>(m->tracked_peak) : QVariant(format_bytes(m->tracked_peak));
    case AllocatorPeak:
    case ReservedPeak:
    case Baseline: {
      if (!m || m->status != "ok") return {};
      const uint64_t b = col == AllocatorPeak ? m->allocator_peak : col == ReservedPeak ? m->reserved_peak : m->baseline;
      return edit ? QVariant::fromValue<qulonglong>(b) : QVariant(format_bytes(b));
    }
    case Time:
      if (!m || m->status != "ok") return {};
      return edit ? QVariant(m->time_ms) : QVariant(time_spread_text(*m));
    case Match:
      if (!m || m->status != "ok") return {};
      if (m->compressed)  // not expected to be bit-identical: how far it is
        return edit ? QVariant(m->grad_error) : QVariant(compressed_error_text(*m));
      return m->matches_reference ? QString("bit-identical") : QString("DIFFERS");
  }
  return {};
}

}  // namespace remat
