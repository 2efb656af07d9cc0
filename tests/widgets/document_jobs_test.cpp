// The document's background strategies: a large model's runs are computed off
// the GUI thread, a result for a replaced model never lands, Cancel stops
// them, and switching the shown run keeps the phase.
#include <QSignalSpy>
#include <QTest>
#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
std::size_t firstBwd(const Schedule& s) {
  for (std::size_t i = 0; i < s.code.size(); ++i)
    if (s.code[i].kind == InstrKind::Bwd) return i;
  return s.code.size();
}
}  // namespace

TEST(StudioDocument, ALargeModelComputesInTheBackground) {
  StudioDocument doc;
  doc.setSpecs({"store-all", "sqrt"});
  QSignalSpy computing(&doc, &StudioDocument::computingChanged);
  doc.loadModel("chain:1000");
  ASSERT_GT(doc.model().size(), StudioDocument::kInlineOps);
  ASSERT_EQ(doc.runCount(), 2);
  EXPECT_TRUE(doc.runs()[0].pending);
  EXPECT_TRUE(doc.runs()[1].pending);
  EXPECT_EQ(doc.computing(), 2);
  EXPECT_EQ(doc.runs()[0].error, "computing...");
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.computing() == 0; }, 60000));
  EXPECT_EQ(computing.back().at(0).toInt(), 0);
  const Model m = load_model("chain:1000");
  for (int i = 0; i < 2; ++i) {
    const StrategyRun& r = doc.runs()[std::size_t(i)];
    ASSERT_TRUE(r.ok()) << r.spec;
    const Schedule s = make_strategy(r.spec)->schedule(m);
    EXPECT_EQ(r.schedule.code, s.code);
    EXPECT_EQ(r.sim.peak_bytes, simulate(m, s).peak_bytes);
    EXPECT_NE(doc.residentIndex(i), nullptr);
  }
  EXPECT_EQ(doc.stepCount(), doc.current()->schedule.code.size());
}

TEST(StudioDocument, AResultForAReplacedModelIsDropped) {
  StudioDocument doc;
  doc.setSpecs({"store-all", "sqrt"});
  doc.loadModel("chain:3000");
  ASSERT_EQ(doc.computing(), 2);
  doc.loadModel("chain:16");  // small: computed at once
  EXPECT_EQ(doc.computing(), 0);
  const Model m = load_model("chain:16");
  const std::size_t storeAll = make_strategy("store-all")->schedule(m).code.size();
  ASSERT_EQ(doc.runs()[0].schedule.code.size(), storeAll);
  QSignalSpy changed(&doc, &StudioDocument::runsChanged);
  ASSERT_TRUE(doc.jobs()->wait(60000));  // chain:3000's jobs end (cancelled or done)
  QTest::qWait(100);                      // and whatever they queued is processed
  EXPECT_EQ(changed.count(), 0);
  EXPECT_EQ(doc.runs()[0].schedule.code.size(), storeAll);
  EXPECT_EQ(doc.model().name, "chain:16");
}

TEST(StudioDocument, CancelStopsTheStrategiesStillComputing) {
  StudioDocument doc;
  doc.setSpecs({"recompute-all"});  // 4.5M forward steps on chain:3000
  doc.loadModel("chain:3000");
  ASSERT_EQ(doc.computing(), 1);
  doc.cancelComputing();
  EXPECT_EQ(doc.computing(), 0);
  ASSERT_EQ(doc.runCount(), 1);
  EXPECT_FALSE(doc.runs()[0].pending);
  EXPECT_EQ(doc.runs()[0].error.rfind("cancelled", 0), 0u) << doc.runs()[0].error;
  QSignalSpy changed(&doc, &StudioDocument::runsChanged);
  ASSERT_TRUE(doc.jobs()->wait(60000));
  QTest::qWait(100);
  EXPECT_EQ(changed.count(), 0);  // nothing delivered
  EXPECT_FALSE(doc.runs()[0].ok());
  // Asking again computes it again.
  doc.setSpecs({"recompute-all"});
  EXPECT_EQ(doc.computing(), 1);
  doc.cancelComputing();
}

TEST(StudioDocument, ShowingAnotherRunKeepsThePhase) {
  StudioDocument doc;
  doc.loadModel("chain:16");  // store-all, recompute-all, sqrt
  const std::size_t b0 = firstBwd(doc.runs()[0].schedule);
  doc.setStep(b0);  // store-all's first backward (the loss's)
  doc.setCurrentRun(2);
  EXPECT_EQ(doc.step(), firstBwd(doc.runs()[2].schedule));
  EXPECT_EQ(doc.current()->schedule.code[doc.step()], (Instr{InstrKind::Bwd, 16}));
  doc.setCurrentRun(1);
  EXPECT_EQ(doc.step(), firstBwd(doc.runs()[1].schedule));
  // The end maps to the end.
  doc.setStep(doc.stepCount() - 1);
  doc.setCurrentRun(0);
  EXPECT_EQ(doc.step(), doc.stepCount() - 1);
}

TEST(StudioDocument, HidingFreesCountsOnlyComputeSteps) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  const Schedule& s = doc.current()->schedule;
  std::size_t compute = 0;
  for (const Instr& i : s.code) compute += i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd;
  ASSERT_LT(compute, s.code.size());
  EXPECT_EQ(doc.shownStepCount(), s.code.size());
  doc.setHideFrees(true);
  EXPECT_EQ(doc.shownStepCount(), compute);
  doc.setShownStep(0);
  std::size_t seen = 1;
  while (doc.shownStep() + 1 < doc.shownStepCount()) {
    const std::size_t before = doc.step();
    doc.stepForward();
    ASSERT_GT(doc.step(), before);
    const InstrKind k = s.code[doc.step()].kind;
    ASSERT_TRUE(k == InstrKind::Fwd || k == InstrKind::Bwd) << doc.step();
    ++seen;
  }
  EXPECT_EQ(seen, compute);
  EXPECT_TRUE(doc.caption().startsWith(QString("Step %1 of %1 ").arg(compute)));
  // A free asked for directly snaps to the next compute step.
  std::size_t aFree = 0;
  while (s.code[aFree].kind != InstrKind::FreeAct) ++aFree;
  doc.setStep(aFree);
  EXPECT_NE(s.code[doc.step()].kind, InstrKind::FreeAct);
  EXPECT_GT(doc.step(), aFree);
}

TEST(StudioDocument, JumpToPeakAndTheReadout) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  doc.setCurrentRun(2);  // sqrt: peak 9 B (README)
  doc.setStep(0);
  EXPECT_EQ(doc.memoryReadout(), "resident 2 B · peak 9 B");  // x and a1 while a1 is computed
  doc.jumpToPeak();
  EXPECT_EQ(doc.step(), doc.current()->sim.peak_index);
  EXPECT_EQ(doc.memoryReadout(), "resident 9 B · peak 9 B");
}
