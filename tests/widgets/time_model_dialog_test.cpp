// The time model's rates in the window: the dialog states the defaults,
// refuses a bad value with one message naming the field, and the document
// times its offloading runs again under the new rates (the stall markers
// follow); other runs are left as they are.
#include <QAction>
#include <QApplication>
#include <QLineEdit>
#include <QScatterSeries>
#include <QTest>
#include <QTimer>
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/sim/time_model.h"
#include "widgets/views/main_window.h"
#include "widgets/document/prepared_run.h"
#include "widgets/document/studio_document.h"
#include "widgets/views/time_model_dialog.h"
#include "widgets/views/timeline_chart.h"

using namespace remat;

TEST(TimeModelDialog, FormatsAndParsesRatesAsTheCliFlagsDo) {
  EXPECT_EQ(format_rate(TimeModel::kDefaultDeviceFlops), "50T");  // 50e12
  EXPECT_EQ(format_rate(TimeModel::kDefaultLinkBandwidth), "25G");  // 25e9
  EXPECT_EQ(format_rate(TimeModel::kDefaultDeviceBandwidth), "2T");  // 2e12
  EXPECT_EQ(format_rate(1.5e9), "1.5G");
  EXPECT_EQ(format_rate(640), "640");
  const TimeModel t = parse_time_model("25e12", " 16G ", "3.35T");
  EXPECT_DOUBLE_EQ(t.device_flops, 25e12);
  EXPECT_DOUBLE_EQ(t.link_bandwidth, 16e9);
  EXPECT_DOUBLE_EQ(t.device_bandwidth, 3.35e12);
  auto error = [](const QString& a, const QString& b, const QString& c) {
    try {
      (void)parse_time_model(a, b, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("50T", "fast", "2T"), "host link bandwidth must be a positive number like 25e9, 25G or 1.5T, got 'fast'");
  EXPECT_EQ(error("0", "25G", "2T"), "device throughput must be a positive number like 25e9, 25G or 1.5T, got '0'");
  EXPECT_EQ(error("50T", "25G", "-2T"), "device memory bandwidth must be a positive number like 25e9, 25G or 1.5T, got '-2T'");
}

TEST(TimeModelDialog, ABadValueKeepsItOpenWithOneMessage) {
  TimeModel custom;
  custom.link_bandwidth = 16e9;
  TimeModelDialog d(custom);
  EXPECT_EQ(d.deviceFlops()->text(), "50T");
  EXPECT_EQ(d.linkBandwidth()->text(), "16G");
  EXPECT_EQ(d.deviceBandwidth()->text(), "2T");
  d.show();
  d.linkBandwidth()->setText("fast");
  d.accept();
  EXPECT_TRUE(d.isVisible());
  EXPECT_NE(d.result(), QDialog::Accepted);
  EXPECT_EQ(d.error(), "host link bandwidth must be a positive number like 25e9, 25G or 1.5T, got 'fast'");
  EXPECT_DOUBLE_EQ(d.timeModel().link_bandwidth, 16e9);  // unchanged
  d.restoreDefaults();
  EXPECT_EQ(d.linkBandwidth()->text(), "25G");
  d.linkBandwidth()->setText("5G");
  d.accept();
  EXPECT_EQ(d.result(), QDialog::Accepted);
  EXPECT_TRUE(d.error().isEmpty());
  EXPECT_DOUBLE_EQ(d.timeModel().link_bandwidth, 5e9);
  EXPECT_DOUBLE_EQ(d.timeModel().device_flops, TimeModel::kDefaultDeviceFlops);
}

// chain:8 under offload:2 (tests/widgets/offload_view_test.cpp): x, a2 and a4
// (one byte each) go to the host during the forward pass and come back one
// after the other in the backward, each just before the recompute that reads
// it, which waits. One byte over the link takes d = 1/B seconds, far longer
// than any of the chain's fwd/bwd at 50 TFLOP/s, so the copy stream runs its
// six copies back to back from the first offload on, and the compute waits
// for the last fetch: the step is the compute before the first offload, 6d,
// then the compute after the last fetch, and the stall is the step minus the
// compute. Only 6d depends on B: from 25 GB/s to 5 GB/s the stall grows by
// exactly 6 (1/5e9 - 1/25e9) seconds, and the same three steps wait.
TEST(TimeModelDialog, TheLinkBandwidthMovesTheStallsByTheDerivedAmount) {
  StudioDocument doc;
  doc.loadModel("chain:8");
  doc.setSpecs({"sqrt", "offload:2"});
  ASSERT_EQ(doc.runCount(), 2);
  const auto sqrtBefore = doc.prepared(0);
  const auto before = doc.prepared(1);
  ASSERT_TRUE(before->run.sim.time.predicted);
  ASSERT_EQ(before->stalls.size(), 3u);
  TimeModel slower;
  slower.link_bandwidth = 5e9;
  doc.setTimeModel(slower);
  EXPECT_DOUBLE_EQ(doc.timeModel().link_bandwidth, 5e9);
  const auto after = doc.prepared(1);
  ASSERT_TRUE(after->run.sim.time.predicted);
  ASSERT_EQ(after->stalls.size(), before->stalls.size());
  for (std::size_t i = 0; i < after->stalls.size(); ++i)
    EXPECT_EQ(after->stalls[i].instruction, before->stalls[i].instruction);
  const double grows = 6 * (1 / 5e9 - 1 / 25e9);
  EXPECT_NEAR(after->run.sim.time.stall_s - before->run.sim.time.stall_s, grows, 1e-9 * grows);
  EXPECT_NEAR(after->run.sim.time.transfer_s, 6 / 5e9, 1e-9 * grows);
  // The run that moves nothing was not made again.
  EXPECT_EQ(doc.prepared(0), sqrtBefore);
  EXPECT_FALSE(doc.prepared(0)->run.sim.time.predicted);
}

TEST(TimeModelDialog, TheRunMenuSetsTheRatesAndTheStallMarkersFollow) {
  MainWindow w;
  w.openModel("chain:8", true);
  w.document()->setSpecs({"offload:2"});
  w.resize(1200, 800);
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_EQ(w.timeline()->stallMarkers().size(), 1);
  const QString before = w.timeline()->stallMarkers().front()->name();
  QAction* a = w.action("Time model rates...");
  ASSERT_NE(a, nullptr);
  bool seen = false;
  QTimer::singleShot(0, [&] {
    auto* d = qobject_cast<TimeModelDialog*>(QApplication::activeModalWidget());
    if (!d) return;
    seen = true;
    d->linkBandwidth()->setText("5G");
    d->accept();
  });
  a->trigger();
  ASSERT_TRUE(seen);
  EXPECT_DOUBLE_EQ(w.document()->timeModel().link_bandwidth, 5e9);
  ASSERT_EQ(w.timeline()->stallMarkers().size(), 1);
  const double stall = w.document()->prepared(0)->run.sim.time.stall_s;
  EXPECT_EQ(w.timeline()->stallMarkers().front()->name(),
            QString("offload:2 stalls %1 over 3 step(s)").arg(QString::fromStdString(format_seconds(stall))));
  EXPECT_NE(w.timeline()->stallMarkers().front()->name(), before);
}
