// What the executor measured for one strategy, as the window shows it: made
// by the run controller from core's run session, read by the comparison table
// and the chart. A header of its own, so that the table and the controller
// do not include each other.
#pragma once
#include <QString>
#include <cstdint>
#include <vector>

namespace remat {

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

// "the CPU", "the GPU (<device>)" for a MeasuredRun::backend: for messages
// and tooltips.
QString backend_label(const QString& backend);

}  // namespace remat
