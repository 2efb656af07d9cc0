// The Run action: executes the chosen strategies for real on the CPU backend
// (core/exec/executor.h) in a worker thread, with progress and cancel, and
// hands back what was measured as plain values (a queued signal): tracked and
// device peaks, time, whether loss and gradients match the first strategy,
// and the measured bytes per instruction for the chart.
#pragma once
#include <QObject>
#include <QThread>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/comparison.h"
#include "core/model.h"
#include "widgets/comparison_model.h"

namespace remat {

class RunController : public QObject {
  Q_OBJECT
 public:
  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;  // cancels and waits for the worker
  static bool available();    // built with the executor
  bool running() const { return thread_ != nullptr; }
  // Starts executing the valid runs; false when already running.
  bool start(const Model& model, const std::vector<StrategyRun>& runs, int repeat = 1);
  void cancel() { cancel_ = true; }

 signals:
  void progress(double fraction);
  // By spec; status "cancelled" for those not run. `error` is set when the
  // model cannot run at all (simulate-only ops).
  void finished(const std::map<std::string, MeasuredRun>& measured, const QString& error);

 private:
  std::unique_ptr<QThread> threadHolder_;
  QThread* thread_ = nullptr;
  std::atomic<bool> cancel_{false};
};

}  // namespace remat
