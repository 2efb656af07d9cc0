// The whole step's memory beside the timeline: one stacked bar per strategy
// whose parts are the weights, their gradients, the optimizer's state and the
// strategy's activation peak, in one unit; the note names the largest part.
#include <QComboBox>
#include <QTest>
#include <cmath>
#include <gtest/gtest.h>

#include <QBarSet>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "widgets/views/main_window.h"
#include "widgets/views/step_memory_bar.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
// Sets bottom to top: parameters, master weights, gradients, optimizer, activations.
enum { kParams, kMaster, kGrads, kOptim, kActs };
double unit_bytes(const QString& name) {
  const QStringList units{"B", "KiB", "MiB", "GiB", "TiB"};
  return std::pow(1024.0, units.indexOf(name));
}
bool has_colour(const QImage& img, QColor c) {
  for (int y = 0; y < img.height(); y += 2)
    for (int x = 0; x < img.width(); x += 2)
      if (img.pixelColor(x, y) == c) return true;
  return false;
}
}  // namespace

TEST(StepMemoryBar, PartsPerStrategyInOneUnitAndTheOptimizerChangesItsPart) {
  const Model m = load_model("mlp:4:256:32");  // f32, no buffers: every parameter byte is a weight
  const auto runs = simulate_strategies(m, {"store-all", "recompute-all"});
  StepMemoryBar bar;
  bar.resize(360, 420);
  bar.setOptimizer(Optimizer::Adam);
  bar.setRuns(m, runs);
  EXPECT_EQ(bar.categories(), (QStringList{"store-all", "recompute-all"}));
  const QList<QBarSet*> sets = bar.sets();
  ASSERT_EQ(sets.size(), 5);
  const double unit = unit_bytes(bar.unitName());
  ASSERT_GT(unit, 0);
  const double params = double(m.param_bytes());
  for (int i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(sets[kParams]->at(i) * unit, params);
    EXPECT_DOUBLE_EQ(sets[kMaster]->at(i), 0);              // f32 weights need no master copy
    EXPECT_DOUBLE_EQ(sets[kGrads]->at(i) * unit, params);   // one gradient per weight
    EXPECT_DOUBLE_EQ(sets[kOptim]->at(i) * unit, 2 * params);  // Adam: exp_avg and exp_avg_sq
    EXPECT_DOUBLE_EQ(sets[kActs]->at(i) * unit, double(runs[std::size_t(i)].sim.peak_bytes));
  }
  // Adam's state is the largest part even under recompute-all (the least activations).
  const double total = 4 * params + double(runs[1].sim.peak_bytes);
  ASSERT_LT(runs[1].sim.peak_bytes, runs[0].sim.peak_bytes);
  EXPECT_EQ(bar.note(), QString("At recompute-all's peak, optimizer state is %1% of the step: checkpointing changes only "
                                "the activations.")
                            .arg(std::lround(100 * 2 * params / total)));
  bar.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&bar));
  const QImage img = bar.view()->grab().toImage();
  EXPECT_TRUE(has_colour(img, sets[kOptim]->color()));
  EXPECT_TRUE(has_colour(img, sets[kActs]->color()));

  // SGD keeps no state; momentum one buffer. The combo box drives it.
  auto* box = bar.findChild<QComboBox*>("optimizer");
  ASSERT_NE(box, nullptr);
  box->setCurrentIndex(box->findText("sgd"));
  EXPECT_EQ(bar.optimizer(), Optimizer::SGD);
  EXPECT_DOUBLE_EQ(bar.sets()[kOptim]->at(0), 0);
  box->setCurrentIndex(box->findText("momentum"));
  EXPECT_DOUBLE_EQ(bar.sets()[kOptim]->at(0) * unit_bytes(bar.unitName()), params);
}

TEST(StepMemoryBar, TheWindowShowsItBesideTheTimeline) {
  MainWindow w;
  w.openModel("mlp:4:256:32", true);
  w.document()->setSpecs({"store-all", "sqrt"});
  w.resize(1400, 900);
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(QTest::qWaitFor([&] { return w.document()->computing() == 0; }, 60000));
  StepMemoryBar* bar = w.stepMemory();
  ASSERT_NE(bar, nullptr);
  EXPECT_EQ(bar->categories(), (QStringList{"store-all", "sqrt"}));
  EXPECT_TRUE(bar->isVisibleTo(&w));
  // Another model: the bars follow it.
  w.openModel("chain:16", true);
  ASSERT_TRUE(QTest::qWaitFor([&] { return w.document()->computing() == 0; }, 60000));
  ASSERT_EQ(bar->parts().size(), 2u);
  EXPECT_EQ(bar->parts()[0].parameters, load_model("chain:16").param_bytes());
  EXPECT_EQ(bar->parts()[1].activations, w.document()->runs()[1].sim.peak_bytes);
  // The window's note says what the CLI's says (remat simulate --optimizer adam).
  EXPECT_TRUE(bar->note().startsWith("At sqrt's peak, optimizer state is ")) << bar->note().toStdString();
}
