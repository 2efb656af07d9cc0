// One model for the window's background work (the Run action, the trade-off
// sweep, the strategies too slow to compute on the GUI thread): each job runs
// on its own thread with a cancel token and a progress callback, and its
// result comes back as a plain value on the tracker's (GUI) thread through a
// queued call. A result is delivered only while its job is current:
// cancel(id) and cancelAll() drop it, and a job started before cancelAll()
// (a new model) can never land in the new state. The destructor cancels every
// job and waits for its thread, so nothing outlives the window.
// (Learnt from KDAB hotspot's jobtracker.h: a job id compared on delivery.)
#pragma once
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>
#include <exception>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

namespace remat {

// What a job's function gets: whether to stop, and a way to say how far it is.
class JobToken {
 public:
  bool cancelled() const { return cancel_->load(std::memory_order_relaxed); }
  // For core APIs that take a cancel flag (ExecOptions::cancel, SweepOptions::cancel).
  const std::atomic<bool>* flag() const { return cancel_.get(); }
  // Reports a fraction in [0, 1] to the GUI thread (at most one report per
  // thousandth); returns false once the job is cancelled.
  bool progress(double fraction);

 private:
  friend class JobTracker;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::function<void(double)> report_;
  int lastPermille_ = -1;
};

class JobTracker : public QObject {
  Q_OBJECT
 public:
  explicit JobTracker(QObject* parent = nullptr);
  ~JobTracker() override;  // cancels every job and waits for its thread

  // Runs `work(JobToken&)` on a new thread; `deliver(result)` is then called on
  // this object's thread unless the job was cancelled meanwhile. An exception
  // thrown by `work` becomes failed(id, what) instead. Returns the job's id (> 0).
  template <class Work, class Deliver>
  int start(Work work, Deliver deliver) {
    using Result = std::invoke_result_t<Work&, JobToken&>;
    const int id = begin();
    JobToken token = tokenFor(id);
    QThread* thread = QThread::create([this, id, token = std::move(token), work = std::move(work),
                                       deliver = std::move(deliver)]() mutable {
      std::shared_ptr<Result> result;
      try {
        result = std::make_shared<Result>(work(token));
      } catch (const std::exception& e) {
        fail(id, e.what());
        return;
      }
      if (token.cancelled()) return;
      QMetaObject::invokeMethod(
          this,
          [this, id, result, deliver = std::move(deliver)]() mutable {
            if (isCurrent(id)) deliver(std::move(*result));
          },
          Qt::QueuedConnection);
    });
    launch(id, thread);
    return id;
  }

  // Stops job `id` (its token says so) and drops its result.
  void cancel(int id);
  // Stops every job started so far and drops their results.
  void cancelAll();
  bool busy() const { return !jobs_.empty(); }
  int running() const { return static_cast<int>(jobs_.size()); }
  // Whether `id` still runs and was not cancelled.
  bool isCurrent(int id) const;
  // Waits up to `msecs` for every job's thread to end (its result, if any, is
  // then queued: the event loop delivers it). False on timeout.
  bool wait(int msecs);

 signals:
  void progress(int id, double fraction);
  void busyChanged(bool busy);
  // `work` threw (an internal error: expected failures belong in its result).
  void failed(int id, const QString& message);

 private:
  struct Job {
    std::shared_ptr<std::atomic<bool>> cancel;
    QThread* thread = nullptr;
  };
  int begin();
  JobToken tokenFor(int id);
  void launch(int id, QThread* thread);
  void ended(int id, QThread* thread);
  void fail(int id, const char* what);  // from the job's thread

  std::map<int, Job> jobs_;  // running threads, cancelled ones included
  int nextId_ = 0;
};

}  // namespace remat
