#include "widgets/controllers/sweep_controller.h"

#include "core/base/errors.h"

namespace remat {
namespace {
struct SweepOutcome {
  SweepResult result;
  std::vector<FamilyPoint> families;
  QString error;
};
}  // namespace

SweepController::SweepController(QObject* parent) : QObject(parent) {
  connect(&jobs_, &JobTracker::progress, this, [this](int id, double f) {
    if (id == job_) emit progress(f);
  });
  connect(&jobs_, &JobTracker::failed, this, [this](int id, const QString& m) {
    if (id != job_) return;
    job_ = 0;
    emit failed(m);
  });
}

void SweepController::start(std::shared_ptr<const Model> model, uint64_t maxInstructions, const TimeModel& time) {
  if (job_) jobs_.cancel(job_);
  const QString title = QString::fromStdString(model->name);
  job_ = jobs_.start(
      [model, maxInstructions, time](JobToken& token) {
        SweepOutcome out;
        try {
          SweepOptions o;
          o.optimal_seconds = kOptimalSeconds;
          o.cancel = token.flag();
          o.progress = [&token](int done, int total) { token.progress(total ? double(done) / total : 1.0); };
          o.limit.max = maxInstructions;
          o.named = named_points(*model, o.limit, &o.notes);
          out.result = sweep(*model, auto_budgets(o.named), o);
          if (!token.cancelled()) out.families = family_points(*model, o.limit, token.flag(), &out.result.notes, time);
        } catch (const InputError& e) {
          out.error = QString::fromStdString(e.what());
        }
        return out;
      },
      [this, title](SweepOutcome o) {
        job_ = 0;
        if (!o.error.isEmpty()) emit failed(o.error);
        else emit ready(title, o.result, o.families);
      });
}

void SweepController::cancel() {
  if (!running()) return;
  jobs_.cancel(job_);
  job_ = 0;
  emit cancelled();
}

}  // namespace remat
