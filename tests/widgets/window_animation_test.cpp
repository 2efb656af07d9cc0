// File > Export animation from the window: the frames are painted and encoded
// off the GUI thread, the activity bar shows the progress, and its Cancel
// stops the export with no file (nor temporary) left behind.
#include <QDir>
#include <QImageReader>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>
#include <gtest/gtest.h>

#include "widgets/views/activity_bar.h"
#include "tests/widgets/shown_window.h"
#include "widgets/views/main_window.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
// Shown, and done computing its strategies.
struct Window : remat::testing::ShownWindow {
  explicit Window(const char* model, const QStringList& specs) : ShownWindow(model, specs, {1200, 800}) {
    EXPECT_TRUE(QTest::qWaitFor([&] { return w.document()->computing() == 0; }, 60000));
  }
};
}  // namespace

TEST(WindowAnimation, ExportsInTheBackgroundWithProgress) {
  Window t("chain:16", {"sqrt"});
  QTemporaryDir dir;
  const QString gif = dir.filePath("sqrt.gif");
  const int steps = static_cast<int>(t.w.document()->prepared(t.w.document()->currentRun())->run.schedule.code.size());
  QSignalSpy written(&t.w, &MainWindow::animationWritten);
  QSignalSpy progress(t.w.exportJobs(), &JobTracker::progress);
  ASSERT_TRUE(t.w.startAnimationExport(gif, false, false, QSize(320, 200), 1, 1, 10, false));
  // Started, not done: the GUI thread is free and the bar says what runs.
  EXPECT_TRUE(t.w.activity()->active("animation"));
  EXPECT_TRUE(t.w.activity()->text().contains("Exporting the animation"));
  ASSERT_TRUE(written.wait(60000));
  EXPECT_EQ(written.front().at(0).toString(), gif);
  EXPECT_EQ(written.front().at(1).toInt(), steps);  // one frame per step of sqrt's schedule
  EXPECT_GT(progress.size(), 1);
  EXPECT_FALSE(t.w.activity()->active("animation"));
  EXPECT_TRUE(t.w.statusBar()->currentMessage().contains(QString("(%1 frames)").arg(steps)));
  QImageReader reader(gif);
  EXPECT_EQ(reader.imageCount(), steps);
}

TEST(WindowAnimation, CancelLeavesNoFile) {
  // recompute-all on chain:200 has thousands of steps (sampled to 1,500
  // frames) at 1920x1080: far longer than the moment the Cancel takes.
  Window t("chain:200", {"recompute-all"});
  QTemporaryDir dir;
  const QString gif = dir.filePath("long.gif");
  QSignalSpy written(&t.w, &MainWindow::animationWritten);
  QSignalSpy progress(t.w.exportJobs(), &JobTracker::progress);
  ASSERT_TRUE(t.w.startAnimationExport(gif, false, false, QSize(1920, 1080), 1, 1, 25, false));
  ASSERT_TRUE(progress.wait(60000));  // frames are being written
  ASSERT_TRUE(t.w.activity()->cancelButton()->isVisible());
  QTest::mouseClick(t.w.activity()->cancelButton(), Qt::LeftButton);
  EXPECT_FALSE(t.w.activity()->active("animation"));
  EXPECT_TRUE(t.w.statusBar()->currentMessage().contains("Animation export cancelled: no file written"));
  // The worker stops at its next frame and removes its temporary file.
  EXPECT_TRUE(QTest::qWaitFor([&] { return QDir(dir.path()).isEmpty(); }, 30000))
      << QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).join(", ").toStdString();
  QTest::qWait(200);
  EXPECT_TRUE(written.isEmpty());
  EXPECT_FALSE(QFile::exists(gif));
}
