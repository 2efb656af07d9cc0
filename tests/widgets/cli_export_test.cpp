// `remat export`, headless: the pictures exist at the requested size, and a
// failure exits 2 with one error line and leaves no file.
#include <QImage>
#include <QProcess>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <filesystem>
#include <gtest/gtest.h>

namespace {
struct Result {
  int code;
  QString out, err;
};
Result remat(const QStringList& args) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("DISPLAY");
  env.remove("WAYLAND_DISPLAY");
  env.remove("QT_QPA_PLATFORM");  // the command must choose offscreen itself
  p.setProcessEnvironment(env);
  p.start(REMAT_CLI, QStringList{"export"} + args);
  p.waitForFinished(60000);
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}
}  // namespace

TEST(CliExport, TimelineAndGraphWithoutADisplay) {
  if (!std::filesystem::exists(REMAT_CLI)) GTEST_SKIP() << "build the remat target first";
  QTemporaryDir dir;
  const QString t = dir.filePath("t.png"), g = dir.filePath("g.svg");
  const Result r = remat({"--model", "chain:16", "--strategy", "store-all,sqrt", "--timeline", t, "--graph", g, "--step",
                          "30", "--size", "700x300"});
  ASSERT_EQ(r.code, 0) << r.err.toStdString();
  EXPECT_EQ(QImage(t).size(), QSize(1400, 600));  // pictures are 2x by default (slides)
  QSvgRenderer svg(g);
  ASSERT_TRUE(svg.isValid());
  EXPECT_EQ(svg.viewBox(), QRect(0, 0, 700, 300));
}

TEST(CliExport, FailuresSaySoAndLeaveNoFile) {
  if (!std::filesystem::exists(REMAT_CLI)) GTEST_SKIP() << "build the remat target first";
  QTemporaryDir dir;
  const QString missing = dir.filePath("missing/t.png");
  Result r = remat({"--model", "chain:16", "--timeline", missing});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains("does not exist")) << r.err.toStdString();
  EXPECT_FALSE(std::filesystem::exists(missing.toStdString()));
  r = remat({"--model", "chain:16", "--timeline", dir.filePath("t.bmp")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains(".png or .svg"));
  r = remat({"--model", "chain:16", "--graph", dir.filePath("g.png"), "--step", "100000"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.contains("beyond the last step"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path().toStdString()));
}
