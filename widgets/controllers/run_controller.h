// The Run action: executes the chosen strategies for real on the CPU or a GPU
// (RunDevice, as `remat run --backend`) through core's RunSession (as
// `remat run` does) in a background job
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

#include "core/model/model.h"
#include "core/sim/instruction_limit.h"
#include "widgets/controllers/job_tracker.h"
#include "widgets/document/run_list.h"
#include "widgets/document/measured_run.h"

namespace remat {

// Where Run executes: Auto is the GPU when the CUDA module loads and a device
// answers, else the CPU (lastNoGpu() says why); Gpu fails the run without one.
enum class RunDevice { Auto, Cpu, Gpu };

class RunController : public QObject {
  Q_OBJECT
 public:
  explicit RunController(QObject* parent = nullptr);
  // Why `model` cannot run (core's check_executable), with a model that can;
  // empty when it can. Said before Run is pressed.
  static QString cannotRun(const Model& model);
  bool running() const { return job_ && jobs_.isCurrent(job_); }
  // Starts executing the valid runs, through core's RunSession as `remat
  // run` does; the store-all reference it adds when not chosen is made under
  // `limit`, as the runs were. False when already running.
  static constexpr int kRepeat = 3;  // timed runs per strategy after the warm-up, as `remat run`
  bool start(const Model& model, const RunList& runs, int repeat = kRepeat, const InstructionLimit& limit = {});
  // For the next start(); a run in progress keeps its own.
  void setDevice(RunDevice d) { device_ = d; }
  RunDevice device() const { return device_; }
  // Whether this build made the CUDA backend module (not whether a GPU exists).
  static bool gpuBuilt();
  // After finished(): the backend that measured (Backend::name(): "cpu",
  // "cuda: <device>") and, when Auto fell back to the CPU, why.
  QString lastBackend() const { return lastBackend_; }
  QString lastNoGpu() const { return lastNoGpu_; }
  // "the CPU", "the GPU (<device>)": for messages.
  static QString backendLabel(const QString& backend);
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
  RunDevice device_ = RunDevice::Auto;
  QString lastBackend_, lastNoGpu_;
  JobTracker jobs_;  // last member: joined first
};

}  // namespace remat
