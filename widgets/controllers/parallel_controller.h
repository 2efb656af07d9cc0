// The window's `remat simulate --parallel`: a model preset, a --parallel spec
// and a strategy in, core/parallel's per-stage report (with the schedule's
// grid and each stage's memory timeline) out, computed in the background.
// A bad spec or a model that cannot be split fails at once with the CLI's
// message.
#pragma once
#include <QObject>
#include <QString>
#include <optional>

#include "core/parallel/parallel_plan.h"
#include "widgets/controllers/job_tracker.h"

namespace remat {

class ParallelController : public QObject {
  Q_OBJECT
 public:
  explicit ParallelController(QObject* parent = nullptr);
  // Starts the simulation (cancelling one under way); false, with failed()
  // emitted, when the spec or the model is refused before any work.
  bool start(const QString& model, const QString& parallel, const QString& strategy);
  void cancel();
  bool running() const { return job_ != 0; }
  // The last report computed, if any.
  const std::optional<ParallelReport>& report() const { return report_; }
  QString error() const { return error_; }
  JobTracker* jobs() { return &jobs_; }

 signals:
  void computed();
  void failed(const QString& why);

 private:
  void fail(const QString& why);
  std::optional<ParallelReport> report_;
  QString error_;
  int job_ = 0;
  JobTracker jobs_;  // last member: joined first
};

}  // namespace remat
