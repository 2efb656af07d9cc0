// The window's one job model: results come back on the GUI thread, progress
// arrives, a cancelled job delivers nothing, a result made stale by
// cancelAll() (a new model) is dropped even when it was already queued, and
// the tracker waits for its threads.
#include <QApplication>
#include <QSignalSpy>
#include <QTest>
#include <QThread>
#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <memory>
#include <thread>

#include "widgets/controllers/job_tracker.h"

using namespace remat;

TEST(JobTracker, DeliversTheResultOnTheGuiThread) {
  JobTracker jobs;
  QSignalSpy busy(&jobs, &JobTracker::busyChanged);
  int got = 0;
  QThread* deliveredOn = nullptr;
  QThread* workedOn = nullptr;
  jobs.start(
      [&workedOn](JobToken&) {
        workedOn = QThread::currentThread();
        int sum = 0;
        for (int i = 1; i <= 100; ++i) sum += i;
        return sum;
      },
      [&](int r) {
        got = r;
        deliveredOn = QThread::currentThread();
      });
  EXPECT_TRUE(jobs.busy());
  ASSERT_TRUE(QTest::qWaitFor([&] { return got != 0; }, 10000));
  EXPECT_EQ(got, 100 * 101 / 2);
  EXPECT_EQ(deliveredOn, QApplication::instance()->thread());
  EXPECT_NE(workedOn, QApplication::instance()->thread());
  ASSERT_TRUE(QTest::qWaitFor([&] { return !jobs.busy(); }, 10000));
  ASSERT_EQ(busy.count(), 2);
  EXPECT_TRUE(busy.at(0).at(0).toBool());
  EXPECT_FALSE(busy.at(1).at(0).toBool());
}

TEST(JobTracker, ProgressArrivesInOrderBeforeTheResult) {
  JobTracker jobs;
  QSignalSpy progress(&jobs, &JobTracker::progress);
  std::vector<int> order;  // 1: a progress report, 2: the result
  QObject::connect(&jobs, &JobTracker::progress, &jobs, [&] { order.push_back(1); });
  bool done = false;
  const int id = jobs.start(
      [](JobToken& t) {
        for (int i = 1; i <= 4; ++i) t.progress(i / 4.0);
        t.progress(1.0);  // the same thousandth again: not reported twice
        return 7;
      },
      [&](int) {
        order.push_back(2);
        done = true;
      });
  ASSERT_TRUE(QTest::qWaitFor([&] { return done; }, 10000));
  ASSERT_EQ(progress.count(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(progress.at(i).at(0).toInt(), id);
    EXPECT_DOUBLE_EQ(progress.at(i).at(1).toDouble(), (i + 1) / 4.0);
  }
  EXPECT_EQ(order, (std::vector<int>{1, 1, 1, 1, 2}));
}

TEST(JobTracker, ACancelledJobStopsAndDeliversNothing) {
  JobTracker jobs;
  std::atomic<bool> started{false}, sawCancel{false};
  bool delivered = false;
  const int id = jobs.start(
      [&](JobToken& t) {
        started = true;
        while (!t.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        sawCancel = true;
        return 1;
      },
      [&](int) { delivered = true; });
  ASSERT_TRUE(QTest::qWaitFor([&] { return started.load(); }, 10000));
  EXPECT_TRUE(jobs.isCurrent(id));
  jobs.cancel(id);
  EXPECT_FALSE(jobs.isCurrent(id));
  ASSERT_TRUE(jobs.wait(10000));  // the job saw its token and ended
  EXPECT_TRUE(sawCancel);
  QTest::qWait(50);  // anything queued would be delivered now
  ASSERT_TRUE(QTest::qWaitFor([&] { return !jobs.busy(); }, 10000));
  EXPECT_FALSE(delivered);
}

TEST(JobTracker, AResultQueuedBeforeCancelAllIsDropped) {
  JobTracker jobs;
  bool delivered = false;
  jobs.start([](JobToken&) { return 1; }, [&](int) { delivered = true; });
  // The job finishes and queues its result; the GUI thread has not run it yet
  // when the model changes.
  ASSERT_TRUE(jobs.wait(10000));
  jobs.cancelAll();
  QTest::qWait(50);
  EXPECT_FALSE(delivered);
  // A job started afterwards is current again.
  bool later = false;
  jobs.start([](JobToken&) { return 2; }, [&](int v) { later = v == 2; });
  EXPECT_TRUE(QTest::qWaitFor([&] { return later; }, 10000));
}

TEST(JobTracker, TheDestructorCancelsAndWaits) {
  auto ended = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> started{false};
  {
    JobTracker jobs;
    jobs.start(
        [ended, &started](JobToken& t) {
          started = true;
          while (!t.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          *ended = true;
          return 0;
        },
        [](int) {});
    ASSERT_TRUE(QTest::qWaitFor([&] { return started.load(); }, 10000));
  }
  EXPECT_TRUE(*ended);  // joined inside the destructor
}

TEST(JobTracker, AThrowingJobReportsFailed) {
  JobTracker jobs;
  QSignalSpy failed(&jobs, &JobTracker::failed);
  bool delivered = false;
  const int id = jobs.start([](JobToken&) -> int { throw std::runtime_error("boom"); }, [&](int) { delivered = true; });
  ASSERT_TRUE(failed.wait(10000));
  EXPECT_EQ(failed.at(0).at(0).toInt(), id);
  EXPECT_EQ(failed.at(0).at(1).toString(), "boom");
  EXPECT_FALSE(delivered);
}
