#include <QTest>
#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/document/node_states.h"
#include "widgets/document/studio_document.h"

using namespace remat;

namespace {
struct Fixture {
  Model model = load_model("chain:16");
  Schedule schedule = make_strategy("sqrt")->schedule(model);
  ResidentIndex index{model, schedule};
  ScheduleFacts facts{model, schedule, make_strategy("sqrt")->declared_checkpoints(model)};
};

std::size_t firstBwd(const Schedule& s) {
  for (std::size_t i = 0; i < s.code.size(); ++i)
    if (s.code[i].kind == InstrKind::Bwd) return i;
  return s.code.size();
}

std::vector<int> liveOps(const NodeStates& s) {
  std::vector<int> out;
  for (std::size_t v = 0; v < s.fwd.size(); ++v)
    if (s.fwd[v] != FwdState::NotComputed && s.fwd[v] != FwdState::Freed) out.push_back(int(v));
  return out;
}
}  // namespace

TEST(NodeStates, MatchTheSimulatorsResidentSetsAtEveryStep) {
  Fixture f;
  ResidentSet rs(f.model);
  for (std::size_t t = 0; t < f.schedule.code.size(); ++t) {
    rs.apply(f.model, f.schedule.code[t]);
    const NodeStates s = node_states_at(f.model, f.schedule, f.index, f.facts, t);
    for (int v = 0; v < f.model.size(); ++v) {
      const bool shownLive = s.fwd[std::size_t(v)] == FwdState::Live || s.fwd[std::size_t(v)] == FwdState::Computing ||
                             s.fwd[std::size_t(v)] == FwdState::Recomputing;
      EXPECT_EQ(shownLive, rs.act[std::size_t(v)] != 0) << "step " << t << " op " << v;
      EXPECT_EQ(s.grad_live[std::size_t(v)] != 0, rs.grad[std::size_t(v)] != 0) << "step " << t << " op " << v;
    }
  }
}

TEST(NodeStates, SqrtChain16AfterTheForwardPass) {
  Fixture f;
  const std::size_t b = firstBwd(f.schedule);
  ASSERT_LT(b, f.schedule.code.size());
  EXPECT_EQ(f.schedule.code[b].op, f.model.loss());
  // The loss is computed with x (a0), a4, a8, a12 and the last segment a13..a15 live.
  EXPECT_EQ(f.schedule.code[b - 2], (Instr{InstrKind::Fwd, 16}));
  EXPECT_EQ(liveOps(node_states_at(f.model, f.schedule, f.index, f.facts, b - 2)),
            (std::vector<int>{0, 4, 8, 12, 13, 14, 15, 16}));
  // Then A(loss) is freed (MSE's backward reads only its input): after the
  // forward pass only x, a4, a8, a12 and the last segment are live.
  const NodeStates s = node_states_at(f.model, f.schedule, f.index, f.facts, b - 1);
  EXPECT_EQ(liveOps(s), (std::vector<int>{0, 4, 8, 12, 13, 14, 15}));
  EXPECT_EQ(s.fwd[16], FwdState::Freed);
  // Ringed: what sqrt's cuts keep (4, 8, 12 on a chain) and the input that recomputes read.
  EXPECT_EQ(f.facts.checkpoint_list(), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(ScheduleFacts(f.model, f.schedule).checkpoint_list(), (std::vector<int>{0, 4, 8}));
  EXPECT_EQ(s.fwd[3], FwdState::Freed);
  for (int v = 1; v < f.model.size(); ++v) EXPECT_EQ(s.bwd[std::size_t(v)], BwdState::Pending);
  // At step 0 the first forward is being computed and nothing else but the input exists.
  const NodeStates s0 = node_states_at(f.model, f.schedule, f.index, f.facts, 0);
  EXPECT_EQ(s0.fwd[1], FwdState::Computing);
  EXPECT_EQ(s0.fwd[5], FwdState::NotComputed);
  // The first backward runs at b; afterwards it is done.
  EXPECT_EQ(node_states_at(f.model, f.schedule, f.index, f.facts, b).bwd[16], BwdState::Running);
  EXPECT_EQ(node_states_at(f.model, f.schedule, f.index, f.facts, b + 1).bwd[16], BwdState::Done);
}

TEST(NodeStates, RecomputeIsFlaggedOnlyForSecondForwards) {
  Fixture f;
  int recomputes = 0;
  for (std::size_t t = 0; t < f.schedule.code.size(); ++t) {
    const NodeStates s = node_states_at(f.model, f.schedule, f.index, f.facts, t);
    const Instr ins = f.schedule.code[t];
    if (ins.kind != InstrKind::Fwd) continue;
    const bool again = f.facts.first_fwd(ins.op) != t;
    EXPECT_EQ(s.fwd[std::size_t(ins.op)], again ? FwdState::Recomputing : FwdState::Computing);
    recomputes += again;
  }
  EXPECT_EQ(recomputes, simulate(f.model, f.schedule).recompute_steps);
}

TEST(StudioDocument, OpensAndKeepsTheModelOnABadSpec) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  ASSERT_EQ(doc.runCount(), 3);
  EXPECT_THROW(doc.loadModel("chain:banana"), std::exception);
  EXPECT_EQ(doc.model().size(), 17);
  doc.setSpecs({"store-all", "every-k:0", "manual:99"});
  ASSERT_EQ(doc.runCount(), 3);
  EXPECT_TRUE(doc.runs()[0].ok());
  EXPECT_FALSE(doc.runs()[1].ok());
  EXPECT_FALSE(doc.runs()[2].ok());
  EXPECT_EQ(doc.currentRun(), 0);
}

// recompute-all on chain:N: N(N+1)/2 forward steps, N backward, a free per
// forward, per gradient (N-1) and for the input.
uint64_t recompute_all_instructions(uint64_t N) { return 2 * (N * (N + 1) / 2) + 2 * (N + 1) - 2; }

TEST(StudioDocument, RefusesQuadraticRecomputeAllOnHugeModels) {
  StudioDocument doc;
  doc.loadModel("chain:10000");
  ASSERT_EQ(doc.runCount(), 3);
  // A large model: every run is computed in the background, the refusal too
  // (stating a schedule's length can take O(model)).
  EXPECT_TRUE(doc.runs()[0].pending);
  EXPECT_TRUE(doc.runs()[1].pending);
  EXPECT_EQ(doc.computing(), 3);
  ASSERT_TRUE(QTest::qWaitFor([&] { return doc.computing() == 0; }, 60000));
  EXPECT_TRUE(doc.runs()[0].ok());
  const uint64_t instructions = recompute_all_instructions(10000);
  ASSERT_GT(instructions, doc.maxInstructions());
  EXPECT_FALSE(doc.runs()[1].ok());
  EXPECT_TRUE(doc.runs()[1].too_large);
  EXPECT_EQ(doc.runs()[1].error.rfind("too large to simulate (" + std::to_string(instructions) + " instructions", 0), 0u)
      << doc.runs()[1].error;
  EXPECT_TRUE(doc.runs()[1].schedule.code.empty());  // refused before it was made
  EXPECT_TRUE(doc.runs()[2].ok());
}

TEST(StudioDocument, TheLimitIsTheStatedLength) {
  StudioDocument doc;
  doc.loadModel("chain:100");
  const uint64_t instructions = recompute_all_instructions(100);
  doc.setMaxInstructions(instructions - 1);
  EXPECT_TRUE(doc.runs()[1].too_large) << doc.runs()[1].error;
  doc.setMaxInstructions(instructions);
  ASSERT_TRUE(doc.runs()[1].ok()) << doc.runs()[1].error;
  EXPECT_EQ(doc.runs()[1].schedule.code.size(), instructions);
}

TEST(StudioDocument, ToggleStartsFromTheShownRunsCheckpoints) {
  StudioDocument doc;
  doc.loadModel("chain:16");
  doc.setCurrentRun(2);  // sqrt: x, a4, a8, a12
  doc.toggleCheckpoint(6);
  EXPECT_EQ(doc.current()->spec, "manual:0,4,6,8,12");
  doc.toggleCheckpoint(4);
  EXPECT_EQ(doc.current()->spec, "manual:0,6,8,12");
  // A manual run chosen in the strategy panel keeps its list too.
  doc.setSpecs({"store-all", "manual:3,7"});
  doc.setCurrentRun(1);
  doc.toggleCheckpoint(10);
  EXPECT_EQ(doc.current()->spec, "manual:0,3,7,10");
  doc.toggleCheckpoint(16);  // the loss: never a checkpoint
  EXPECT_EQ(doc.current()->spec, "manual:0,3,7,10");
}
