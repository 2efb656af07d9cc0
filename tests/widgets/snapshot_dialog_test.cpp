// File › Open PyTorch snapshot: the dialog reads off the GUI thread and draws
// the recorded curve over the prediction, or shows the reader's error.
#include <gtest/gtest.h>

#include <QChart>
#include <QChartView>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <fstream>

#include "core/io/torch_snapshot.h"
#include "core/io/model_source.h"
#include "core/strategies/strategy.h"
#include "widgets/views/snapshot_dialog.h"

using namespace remat;

namespace {

struct Fixture {
  Model model = load_model("mlp:4:64:8");
  StrategyRun run = simulate_strategies(model, {"sqrt"}).front();
};

}  // namespace

// A snapshot of the prediction itself, compared with it: nothing lived before
// the trace, so the recorded peak above the start is the predicted peak and
// the difference is zero.
TEST(SnapshotDialog, DrawsTheRecordedCurveOverThePrediction) {
  Fixture f;
  ASSERT_TRUE(f.run.ok()) << f.run.error;
  QTemporaryDir dir;
  const std::string path = dir.filePath("sqrt.pickle").toStdString();
  write_torch_snapshot(make_torch_snapshot(simulated_allocations(f.model, f.run.schedule), "test"), path);

  SnapshotDialog d(f.model, f.run, QString::fromStdString(path));
  QSignalSpy spy(&d, &SnapshotDialog::finishedReading);
  ASSERT_TRUE(spy.wait(30000));
  ASSERT_TRUE(d.error().isEmpty()) << d.error().toStdString();
  ASSERT_TRUE(d.comparison().has_value());
  const SnapshotComparison& c = *d.comparison();
  EXPECT_EQ(c.measured_start, 0u);
  EXPECT_EQ(c.predicted_peak, f.run.sim.peak_bytes);
  EXPECT_EQ(c.measured_peak, f.run.sim.peak_bytes);
  EXPECT_EQ(c.difference, 0);
  ASSERT_NE(d.chart()->chart(), nullptr);
  EXPECT_EQ(d.chart()->chart()->series().size(), 3);  // predicted, recorded, the phase line
}

TEST(SnapshotDialog, ShowsTheReadersErrorForABrokenPickle) {
  Fixture f;
  QTemporaryDir dir;
  const std::string whole = dir.filePath("whole.pickle").toStdString(), cut = dir.filePath("cut.pickle").toStdString();
  write_torch_snapshot(make_torch_snapshot(simulated_allocations(f.model, f.run.schedule), "test"), whole);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 100);

  SnapshotDialog d(f.model, f.run, QString::fromStdString(cut));
  QSignalSpy spy(&d, &SnapshotDialog::finishedReading);
  ASSERT_TRUE(spy.wait(30000));
  EXPECT_FALSE(d.comparison().has_value());
  EXPECT_TRUE(d.error().contains("not a readable pickle at byte ")) << d.error().toStdString();
  EXPECT_TRUE(d.error().contains(QString::fromStdString(cut))) << d.error().toStdString();
}
