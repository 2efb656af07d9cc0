// The Trade-off tab's sweep (core/analysis/sweep.h) as one background job
// (job_tracker.h) per model: starting another, or cancel(), drops the older
// one; progress counts budgets done. The same job places the other families'
// points (tradeoff_families.h: offload, ...) with the time model.
#pragma once
#include <QObject>
#include <QString>
#include <cstdint>
#include <memory>

#include "core/model/model.h"
#include "core/analysis/sweep.h"
#include "widgets/controllers/job_tracker.h"
#include "widgets/views/tradeoff_families.h"

namespace remat {

class SweepController : public QObject {
  Q_OBJECT
 public:
  explicit SweepController(QObject* parent = nullptr);
  // DAGs spend at most this long per budget in the optimal search.
  static constexpr double kOptimalSeconds = 0.25;
  // Schedules longer than `maxInstructions` are left out with a note
  // (SweepResult::notes), as the window refuses them.
  // The families' points are timed under `time`.
  void start(std::shared_ptr<const Model> model, uint64_t maxInstructions, const TimeModel& time = {});
  void cancel();
  bool running() const { return job_ && jobs_.isCurrent(job_); }
  JobTracker* jobs() { return &jobs_; }

 signals:
  void progress(double fraction);
  void ready(const QString& title, const SweepResult& result, const std::vector<FamilyPoint>& families);
  void failed(const QString& message);  // the model cannot be swept (InputError)
  void cancelled();

 private:
  int job_ = 0;
  JobTracker jobs_;  // last member: joined first
};

}  // namespace remat
