#include "widgets/controllers/job_tracker.h"

#include <QDeadlineTimer>
#include <algorithm>
#include <cmath>

namespace remat {

bool JobToken::progress(double fraction) {
  const int permille = static_cast<int>(std::floor(std::clamp(fraction, 0.0, 1.0) * 1000));
  if (permille != lastPermille_ && report_) {
    lastPermille_ = permille;
    report_(permille / 1000.0);
  }
  return !cancelled();
}

JobTracker::JobTracker(QObject* parent) : QObject(parent) {}

JobTracker::~JobTracker() {
  for (auto& [id, job] : jobs_) job.cancel->store(true);
  for (auto& [id, job] : jobs_) {
    job.thread->wait();
    delete job.thread;
  }
}

int JobTracker::begin() {
  const int id = ++nextId_;
  jobs_[id].cancel = std::make_shared<std::atomic<bool>>(false);
  return id;
}

JobToken JobTracker::tokenFor(int id) {
  JobToken t;
  t.cancel_ = jobs_[id].cancel;
  // Progress crosses to the GUI thread like the result: queued, and only
  // while the job is current.
  t.report_ = [this, id](double f) {
    QMetaObject::invokeMethod(
        this, [this, id, f] { if (isCurrent(id)) emit progress(id, f); }, Qt::QueuedConnection);
  };
  return t;
}

void JobTracker::launch(int id, QThread* thread) {
  const bool wasBusy = jobs_.size() > 1;
  jobs_[id].thread = thread;
  connect(thread, &QThread::finished, this, [this, id, thread] { ended(id, thread); });
  thread->start();
  if (!wasBusy) emit busyChanged(true);
}

void JobTracker::ended(int id, QThread* thread) {
  // The job may already be gone: the destructor and wait() reap threads too.
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.thread != thread) return;
  thread->wait();
  thread->deleteLater();
  jobs_.erase(it);
  if (jobs_.empty()) emit busyChanged(false);
}

void JobTracker::fail(int id, const char* what) {
  QMetaObject::invokeMethod(
      this, [this, id, m = QString::fromUtf8(what)] { if (isCurrent(id)) emit failed(id, m); }, Qt::QueuedConnection);
}

void JobTracker::cancel(int id) {
  if (auto it = jobs_.find(id); it != jobs_.end()) it->second.cancel->store(true);
}

void JobTracker::cancelAll() {
  for (auto& [id, job] : jobs_) job.cancel->store(true);
}

bool JobTracker::isCurrent(int id) const {
  const auto it = jobs_.find(id);
  return it != jobs_.end() && !it->second.cancel->load();
}

bool JobTracker::wait(int msecs) {
  QDeadlineTimer deadline(msecs);
  for (auto& [id, job] : jobs_)
    if (!job.thread->wait(deadline)) return false;
  return true;
}

}  // namespace remat
