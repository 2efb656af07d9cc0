// Animation export: the GIF decodes with one frame per step of the longest
// strategy (or the sampled count), at the asked size, its lanes painted in
// the strategies' colours; a cancel or a bad argument leaves no file.
#include <QImageReader>
#include <QProcess>
#include <QTemporaryDir>
#include <filesystem>
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "core/strategies/registry.h"
#include "widgets/export/animation_export.h"
#include "widgets/views/lanes_painter.h"
#include "widgets/document/strategy_colors.h"

using namespace remat;

namespace {
struct Three {
  Model model = load_model("chain:16");
  std::vector<StrategyRun> runs = simulate_strategies(model, {"store-all", "recompute-all", "sqrt"});
  std::vector<const StrategyRun*> ptrs() const { return {&runs[0], &runs[1], &runs[2]}; }
  QTemporaryDir dir;
  std::string path(const char* name) const { return dir.filePath(name).toStdString(); }
};

bool near(QColor a, QColor b, int tol) {
  return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol &&
         std::abs(a.blue() - b.blue()) <= tol;
}
}  // namespace

TEST(AnimationExport, OneFramePerStepOfTheLongestStrategyInTheirColours) {
  Three t;
  AnimationOptions o;
  o.size = QSize(480, 360);
  o.fps = 10;
  const std::string gif = t.path("three.gif");
  // recompute-all is the longest: it drives the frames, one per instruction.
  const std::size_t longest = make_strategy("recompute-all")->schedule(t.model).code.size();
  ASSERT_GT(longest, make_strategy("store-all")->schedule(t.model).code.size());
  ASSERT_LT(longest, std::size_t(o.maxFrames));
  EXPECT_EQ(export_animation(t.model, t.ptrs(), gif, o), int(longest));

  QImageReader reader(QString::fromStdString(gif));
  ASSERT_TRUE(reader.canRead()) << reader.errorString().toStdString();
  EXPECT_EQ(reader.format(), "gif");
  EXPECT_EQ(reader.imageCount(), int(longest));
  EXPECT_EQ(reader.loopCount(), -1);  // loops forever
  const QImage first = reader.read();
  ASSERT_EQ(first.size(), QSize(480, 360));
  EXPECT_EQ(reader.nextImageDelay(), 100);  // 10 fps
  // Each lane's left strip in its strategy's colour (GIF quantisation: close).
  for (int i = 0; i < 3; ++i) {
    const QRectF lane = lane_rect(QRectF(0, 0, 480, 360), i, 3, o.fontScale, true);
    const QColor want = strategy_color(QString::fromStdString(t.runs[std::size_t(i)].name));
    EXPECT_TRUE(near(first.pixelColor(2, int(lane.center().y())), want, 12))
        << t.runs[std::size_t(i)].name << ": " << first.pixelColor(2, int(lane.center().y())).name().toStdString();
  }
  // The frames change as the steps go on.
  QImage later;
  for (int k = 1; k < int(longest) / 2; ++k) later = reader.read();
  ASSERT_EQ(later.size(), first.size());
  EXPECT_NE(later.convertToFormat(QImage::Format_RGB32), first.convertToFormat(QImage::Format_RGB32));
}

TEST(AnimationExport, LongSchedulesAreSampledAndScaled) {
  Three t;
  AnimationOptions o;
  o.size = QSize(200, 120);
  o.scale = 2;
  o.maxFrames = 20;
  const std::string gif = t.path("sampled.gif");
  EXPECT_EQ(export_animation(t.model, {&t.runs[2]}, gif, o), 20);
  QImageReader reader(QString::fromStdString(gif));
  EXPECT_EQ(reader.imageCount(), 20);
  EXPECT_EQ(reader.read().size(), QSize(400, 240));
}

TEST(AnimationExport, CancelAndBadArgumentsLeaveNoFile) {
  Three t;
  AnimationOptions o;
  o.size = QSize(200, 120);
  const std::string gif = t.path("cancelled.gif");
  int calls = 0;
  EXPECT_EQ(export_animation(t.model, t.ptrs(), gif, o, {}, [&](double done) { return ++calls, done < 0.5; }), 0);
  EXPECT_GT(calls, 1);
  EXPECT_FALSE(std::filesystem::exists(gif));
  EXPECT_TRUE(std::filesystem::is_empty(t.dir.path().toStdString()));  // no temporary left either
  EXPECT_THROW(export_animation(t.model, t.ptrs(), t.path("a.bmp"), o), InputError);
  EXPECT_THROW(export_animation(t.model, {t.ptrs()[0], t.ptrs()[1], t.ptrs()[2], t.ptrs()[0]}, gif, o), InputError);
  AnimationOptions tiny = o;
  tiny.size = QSize(10, 10);
  EXPECT_THROW(export_animation(t.model, t.ptrs(), gif, tiny), InputError);
  EXPECT_THROW(export_animation(t.model, t.ptrs(), t.path("missing/dir/a.gif"), o), InputError);
  EXPECT_FALSE(std::filesystem::exists(gif));
}

TEST(AnimationExport, FromTheCommandLine) {
  if (!std::filesystem::exists(REMAT_CLI)) GTEST_SKIP() << "build the remat target first";
  QTemporaryDir dir;
  const QString gif = dir.filePath("cli.gif");
  QProcess p;
  p.start(REMAT_CLI, {"export", "--model", "chain:16", "--strategy", "store-all,recompute-all,sqrt", "--animation",
                      gif, "--size", "320x200", "--fps", "5", "--max-frames", "30", "--with-chart"});
  ASSERT_TRUE(p.waitForFinished(120000));
  ASSERT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
  EXPECT_TRUE(p.readAllStandardOutput().contains("(30 frames at 5 fps)"));
  QImageReader reader(gif);
  EXPECT_EQ(reader.imageCount(), 30);
  EXPECT_EQ(reader.read().size(), QSize(320, 200));
  EXPECT_EQ(reader.nextImageDelay(), 200);
  // A wrong extension: exit 2, one line, no file.
  QProcess bad;
  bad.start(REMAT_CLI, {"export", "--model", "chain:16", "--animation", dir.filePath("x.avi")});
  ASSERT_TRUE(bad.waitForFinished(60000));
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_TRUE(bad.readAllStandardError().contains(".gif, .mp4 or .webm"));
  EXPECT_FALSE(QFile::exists(dir.filePath("x.avi")));
  // The animation's options are checked before any work: the timeline asked
  // for beside a bad frame rate is not written either.
  QProcess early;
  early.start(REMAT_CLI, {"export", "--model", "chain:16", "--timeline", dir.filePath("t.png"), "--animation",
                          dir.filePath("y.gif"), "--fps", "61"});
  ASSERT_TRUE(early.waitForFinished(60000));
  EXPECT_EQ(early.exitCode(), 2);
  EXPECT_TRUE(early.readAllStandardError().contains("frame rate must be in (0, 60]"));
  EXPECT_FALSE(QFile::exists(dir.filePath("t.png")));
  EXPECT_FALSE(QFile::exists(dir.filePath("y.gif")));
}
