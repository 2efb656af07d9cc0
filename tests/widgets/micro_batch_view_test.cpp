// Micro-batches in the window: K re-simulates the loaded model at batch/K in
// the background (the strategies stay), the whole-step bar says K, a K that
// does not divide the batch is refused with core's message, and the K sweep
// dialog fills its table from a worker. Expected figures come from the preset
// built at batch/K (micro_batch(mlp:4:64:8, K) is mlp:4:64:8/K).
#include <QComboBox>
#include <QSignalSpy>
#include <QTableWidget>
#include <QLabel>
#include <QTest>
#include <gtest/gtest.h>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/analysis/step_memory.h"
#include "core/strategies/registry.h"
#include "widgets/document/comparison_model.h"
#include "widgets/views/main_window.h"
#include "widgets/views/micro_batch_dialog.h"
#include "widgets/views/step_memory_bar.h"
#include "widgets/document/strategy_defaults.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
uint64_t peakOf(const std::string& model, const char* spec) {
  const Model m = make_preset(model);
  return simulate(m, make_strategy(spec)->schedule(m)).peak_bytes;
}
}  // namespace

TEST(MicroBatchView, ChoicesArePowersOfTwoThatDivideTheBatch) {
  EXPECT_EQ(micro_batch_choices(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(micro_batch_choices(12), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(micro_batch_choices(1), (std::vector<int>{1}));
  EXPECT_EQ(micro_batch_choices(1 << 20, 3), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(model_batch(make_preset("mlp:4:64:8")), 8);
}

TEST(MicroBatchView, KResimulatesOneMicroBatchInTheBackground) {
  StudioDocument doc;
  doc.loadModel("mlp:4:64:8");
  doc.setSpecs({"store-all", "sqrt"});
  doc.setCurrentRun(1);
  QSignalSpy changed(&doc, &StudioDocument::microBatchesChanged);
  doc.setMicroBatches(4);
  // Nothing changes until the worker's model arrives.
  EXPECT_EQ(doc.microBatches(), 1);
  EXPECT_EQ(doc.pendingMicroBatches(), 4);
  EXPECT_EQ(doc.computing(), 1);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.microBatches() == 4; }, 20000));
  EXPECT_EQ(changed.last().at(0).toInt(), 4);
  EXPECT_EQ(doc.model().op(0).shape[0], 2);
  EXPECT_EQ(doc.loadedModel().op(0).shape[0], 8);
  ASSERT_EQ(doc.runCount(), 2);
  EXPECT_EQ(doc.runs()[0].sim.peak_bytes, peakOf("mlp:4:64:2", "store-all"));
  EXPECT_EQ(doc.runs()[1].sim.peak_bytes, peakOf("mlp:4:64:2", "sqrt"));
  EXPECT_EQ(doc.current()->spec, "sqrt");  // the shown strategy stays
  EXPECT_EQ(spec_texts(doc.specs()), (QStringList{"store-all", "sqrt"}));
  // Back to K = 1: the loaded model itself.
  doc.setMicroBatches(1);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.microBatches() == 1; }, 20000));
  EXPECT_EQ(doc.runs()[1].sim.peak_bytes, peakOf("mlp:4:64:8", "sqrt"));
  // A new model starts at K = 1.
  doc.setMicroBatches(2);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.microBatches() == 2; }, 20000));
  doc.loadModel("mlp:4:64:4");
  EXPECT_EQ(doc.microBatches(), 1);
  EXPECT_EQ(doc.model().op(0).shape[0], 4);
}

TEST(MicroBatchView, AKThatDoesNotDivideIsRefusedWithCoresMessage) {
  StudioDocument doc;
  doc.loadModel("mlp:4:64:8");
  QSignalSpy failed(&doc, &StudioDocument::microBatchesFailed);
  doc.setMicroBatches(3);
  ASSERT_TRUE(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 20000));
  EXPECT_EQ(failed.front().at(0).toString(),
            "--micro-batches 3: does not divide the batch (8, the first dimension of the input [8,64])");
  EXPECT_EQ(doc.microBatches(), 1);
  EXPECT_EQ(doc.model().op(0).shape[0], 8);
  EXPECT_EQ(doc.computing(), 0);
}

TEST(MicroBatchView, TheWindowsSelectorAndTheWholeStepBarSayK) {
  MainWindow w;
  ASSERT_TRUE(w.openModel("mlp:4:64:8", true));
  w.document()->setSpecs({"store-all", "sqrt"});
  QComboBox* k = w.microBatchBox();
  ASSERT_EQ(k->count(), 4);
  EXPECT_EQ(k->itemData(3).toInt(), 8);
  EXPECT_TRUE(k->isEnabled());
  EXPECT_TRUE(w.stepMemory()->microBatchText().isEmpty());
  k->setCurrentIndex(2);
  emit k->activated(2);  // K = 4
  ASSERT_TRUE(QTest::qWaitFor([&] { return w.document()->microBatches() == 4; }, 20000));
  EXPECT_EQ(k->currentData().toInt(), 4);
  EXPECT_TRUE(w.stepMemory()->microBatchText().startsWith("K = 4 micro-batches of 2 (batch 8)"))
      << w.stepMemory()->microBatchText().toStdString();
  // The bars hold one micro-batch's activations over the same baseline.
  ASSERT_EQ(w.stepMemory()->parts().size(), 2u);
  EXPECT_EQ(w.stepMemory()->parts()[1].activations, peakOf("mlp:4:64:2", "sqrt"));
  EXPECT_EQ(w.stepMemory()->parts()[1].baseline(),
            step_memory(make_preset("mlp:4:64:8"), w.stepMemory()->optimizer(), 0).baseline());
  // chain:16 has a batch of 1: nothing to choose.
  ASSERT_TRUE(w.openModel("chain:16", true));
  EXPECT_EQ(k->count(), 1);
  EXPECT_FALSE(k->isEnabled());
}

TEST(MicroBatchView, TheKSweepDialogFillsItsTableInTheBackground) {
  MainWindow w;
  ASSERT_TRUE(w.openModel("mlp:4:64:8", true));
  w.document()->setSpecs({"store-all", "sqrt"});
  MicroBatchDialog* d = w.openMicroBatchSweep();
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(QTest::qWaitFor([&] { return !d->running(); }, 20000));
  QTableWidget* t = d->table();
  ASSERT_EQ(t->rowCount(), 8);  // K = 1, 2, 4, 8 times two strategies
  const uint64_t baseline = step_memory(make_preset("mlp:4:64:8"), w.stepMemory()->optimizer(), 0).baseline();
  for (int row = 0; row < 8; ++row) {
    const int kk = 1 << (row / 2);
    const char* spec = row % 2 ? "sqrt" : "store-all";
    const uint64_t peak = peakOf("mlp:4:64:" + std::to_string(8 / kk), spec);
    EXPECT_EQ(t->item(row, 0)->text(), QString::number(kk));
    EXPECT_EQ(t->item(row, 1)->text(), QString::number(8 / kk));
    EXPECT_EQ(t->item(row, 2)->text(), spec);
    EXPECT_EQ(t->item(row, 3)->text(), format_bytes(peak)) << row;
    EXPECT_EQ(t->item(row, 4)->text(), format_bytes(baseline + peak)) << row;
  }
  d->close();
}

// A batch of one has only K = 1: the dialog says why instead of a bare
// one-row table.
TEST(MicroBatchView, TheKSweepSaysWhyABatchOfOneHasOnlyOneK) {
  MainWindow w;
  ASSERT_TRUE(w.openModel("chain:16", true));
  MicroBatchDialog* d = w.openMicroBatchSweep();
  ASSERT_NE(d, nullptr);
  auto* intro = d->findChild<QLabel*>("intro");
  ASSERT_NE(intro, nullptr);
  EXPECT_TRUE(intro->text().contains("Only K = 1: the batch is 1 sample, which cannot be split into micro-batches"))
      << intro->text().toStdString();
  ASSERT_TRUE(QTest::qWaitFor([&] { return !d->running(); }, 20000));
  d->close();
}

TEST(MicroBatchView, CancelLeavesKAsItWas) {
  StudioDocument doc;
  doc.loadModel("mlp:4:64:8");
  QSignalSpy changed(&doc, &StudioDocument::microBatchesChanged);
  doc.setMicroBatches(2);
  ASSERT_EQ(doc.computing(), 1);
  // The worker's result is delivered through the event loop: cancelled
  // before it runs, it never lands, whenever the worker finishes.
  doc.cancelComputing();
  EXPECT_EQ(doc.computing(), 0);
  ASSERT_FALSE(changed.isEmpty());
  EXPECT_EQ(changed.last().at(0).toInt(), 1);  // the selector goes back
  ASSERT_TRUE(doc.jobs()->wait(20000));
  QCoreApplication::processEvents();
  EXPECT_EQ(doc.microBatches(), 1);
  EXPECT_EQ(doc.model().op(0).shape[0], 8);
}
