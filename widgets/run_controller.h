// The Run action: executes the chosen strategies for real on the CPU backend
// with core's execute_strategies (as `remat run` does) in a background job
// (job_tracker.h), with progress and cancel, and hands back what was measured
// as plain values: tracked, allocator and reserved peaks, time, the loss and
// gradient hash, whether they equal store-all's bit for bit (core's
// same_loss_and_grads, store-all added as the reference when not chosen), and
// the tracked bytes per instruction for the chart.
#pragma once
#include <QObject>
#include <QString>
#include <map>
#include <string>
#include <vector>

#include "core/model.h"
#include "widgets/comparison_model.h"
#include "widgets/job_tracker.h"
#include "widgets/run_list.h"

namespace remat {

class RunController : public QObject {
  Q_OBJECT
 public:
  explicit RunController(QObject* parent = nullptr);
  // Why `model` cannot run (core's check_executable), with a model that can;
  // empty when it can. Said before Run is pressed.
  static QString cannotRun(const Model& model);
  bool running() const { return job_ && jobs_.isCurrent(job_); }
  // Starts executing the valid runs; false when already running.
  bool start(const Model& model, const RunList& runs, int repeat = 3);
  // Stops the run: nothing is delivered, cancelled() is emitted at once.
  void cancel();
  JobTracker* jobs() { return &jobs_; }

 signals:
  void progress(double fraction);
  // By spec. `error` is set when the model cannot run at all.
  void finished(const std::map<std::string, MeasuredRun>& measured, const QString& error);
  void cancelled();

 private:
  int job_ = 0;
  JobTracker jobs_;  // last member: joined first
};

}  // namespace remat
