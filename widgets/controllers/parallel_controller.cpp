#include "widgets/controllers/parallel_controller.h"

#include "core/base/errors.h"
#include "core/parallel/parallel_spec.h"
#include "core/strategies/registry.h"

namespace remat {

ParallelController::ParallelController(QObject* parent) : QObject(parent) {
  connect(&jobs_, &JobTracker::failed, this, [this](int id, const QString& what) {
    if (id != job_) return;
    job_ = 0;
    fail(what);
  });
}

void ParallelController::fail(const QString& why) {
  error_ = why;
  emit failed(why);
}

bool ParallelController::start(const QString& model, const QString& parallel, const QString& strategy) {
  cancel();
  ParallelSpec spec;
  const std::string m = model.toStdString(), s = strategy.toStdString();
  try {  // what the CLI refuses before any work, refused here the same way
    spec = parse_parallel_spec(parallel.toStdString());
    if (!names_a_model_file(m)) (void)parse_stack_shape(m);  // a file is read (and its blocks found) in the job
    (void)make_strategy(s);
  } catch (const InputError& e) {
    fail(QString::fromStdString(e.what()));
    return false;
  }
  error_.clear();
  struct Outcome {
    std::optional<ParallelReport> report;
    QString error;  // a strategy that cannot apply to a stage, a grid over its limit
  };
  job_ = jobs_.start(
      [m, spec, s](JobToken&) {
        Outcome o;
        try {  // Adam, as the CLI's default here: mixed precision for 16-bit presets
          o.report = simulate_parallel(m, spec, s, TimeModel{}, InstructionLimit{}, Optimizer::Adam);
        } catch (const InputError& e) {
          o.error = QString::fromStdString(e.what());
        }
        return o;
      },
      [this](Outcome o) {
        job_ = 0;
        if (!o.report) return fail(o.error);
        report_ = std::move(o.report);
        emit computed();
      });
  return true;
}

void ParallelController::cancel() {
  if (!job_) return;
  jobs_.cancel(job_);
  job_ = 0;
}

}  // namespace remat
