// dtr as a run-time mode (core/strategies/dtr.h, Strategy::play_live): the
// executor lets the policy decide inside each run from the allocator's count;
// it must decide what the simulation decided, stay under its budget and give
// store-all's gradients bit for bit.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/run_session.h"
#include "core/exec/same_result.h"
#include "core/sim/simulator.h"
#include "core/strategies/dtr.h"
#include "core/strategies/registry.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;

uint64_t peak_of(const Model& m, const std::string& spec) { return simulate(m, make_strategy(spec)->schedule(m)).peak_bytes; }

RunSessionOptions on_cpu(bool live = true) {
  RunSessionOptions o;
  o.backend = BackendKind::Cpu;
  o.decide_live = live;
  return o;
}

TEST(DtrLive, DecidesInsideTheRunAsSimulatedUnderItsBudget) {
  for (const char* preset : {"mlp:4:16:4", "transformer:1:16:4:2", "resnet:18:2:32:2:10", "gpt:1:32:2:16:2"}) {
    SCOPED_TRACE(preset);
    const Model m = make_preset(preset);
    const uint64_t low = peak_of(m, "recompute-all"), high = peak_of(m, "store-all");
    for (const char* h : {"", ":h-dtr-eq", ":lru", ":largest"}) {
      const uint64_t budget = low + (high - low) / 3;
      const std::string spec = "dtr:" + std::to_string(budget) + h;
      SCOPED_TRACE(spec);
      RunSession session(m, {spec}, on_cpu());
      const RunSessionResult r = session.run(quick());
      ASSERT_EQ(r.results.size(), 2u);
      const ExecResult& dtr = r.results[1];
      ASSERT_TRUE(dtr.ok()) << dtr.message;
      EXPECT_TRUE(dtr.decided_live);
      EXPECT_FALSE(r.reference_result().decided_live);
      EXPECT_EQ(dtr.tracked_peak_bytes, r.plans[1].sim.peak_bytes);
      EXPECT_LE(dtr.tracked_peak_bytes, budget);
      EXPECT_GT(r.plans[1].sim.recompute_steps, 0u);  // it had to evict
      EXPECT_TRUE(same_loss_and_grads(dtr, r.reference_result()));
    }
  }
}

TEST(DtrLive, ReplayingTheSimulatedDecisionsGivesTheSameRun) {
  const Model m = make_preset("mlp:4:16:4");
  const uint64_t budget = (peak_of(m, "recompute-all") + peak_of(m, "store-all")) / 2;
  const std::string spec = "dtr:" + std::to_string(budget);
  RunSession live(m, {spec}, on_cpu(true)), replay(m, {spec}, on_cpu(false));
  const RunSessionResult a = live.run(quick()), b = replay.run(quick());
  ASSERT_TRUE(a.results[1].ok() && b.results[1].ok());
  EXPECT_TRUE(a.results[1].decided_live);
  EXPECT_FALSE(b.results[1].decided_live);
  EXPECT_EQ(a.results[1].grad_hash, b.results[1].grad_hash);
  EXPECT_EQ(a.results[1].tracked_peak_bytes, b.results[1].tracked_peak_bytes);
}

// The policy reads what is held from LiveRun::live_bytes, not from its own
// count: an allocator that reports more makes it evict more.
TEST(DtrLive, DecisionsComeFromTheAllocatorsCount) {
  const Model m = make_preset("chain:12");
  const uint64_t budget = peak_of(m, "store-all") - 2;
  const DtrPlay simulated = play_dtr(m, budget, DtrHeuristic::HDtr);
  ResidentSet held(m);
  std::vector<Instr> handed;
  uint64_t extra = 0;
  const LiveRun live{[&](Instr ins) {
                       handed.push_back(ins);
                       held.apply(m, ins);
                     },
                     [&] { return held.bytes + extra; }};
  EXPECT_EQ(play_dtr_live(m, budget, DtrHeuristic::HDtr, live).schedule.code, simulated.schedule.code);
  EXPECT_EQ(handed, simulated.schedule.code);
  handed.clear();
  held = ResidentSet(m);
  extra = 1;  // one byte more than the policy's own count
  const DtrPlay tighter = play_dtr_live(m, budget, DtrHeuristic::HDtr, live);
  EXPECT_EQ(handed, tighter.schedule.code);
  EXPECT_GT(tighter.evictions.size(), simulated.evictions.size());
}

// A strategy whose run-time decisions differ from its simulated schedule
// fails its run, naming the first instruction that differs.
class Contrary final : public Strategy {
 public:
  std::string name() const override { return "contrary"; }
  Schedule schedule(const Model& m) const override { return make_strategy("store-all")->schedule(m); }
  ScheduleSize size(const Model& m, uint64_t limit) const override { return make_strategy("store-all")->size(m, limit); }
  void play_live(const Model& m, const LiveRun& live) const override {
    for (Instr i : make_strategy("recompute-all")->schedule(m).code) live.run(i);
  }
};

TEST(DtrLive, ADifferentDecisionFailsTheRun) {
  const Model m = make_preset("chain:6:16");
  const Contrary contrary;
  const Schedule s = contrary.schedule(m);
  const Simulation sim = simulate(m, s);
  CpuBackend backend;
  const std::vector<ExecResult> r = execute_simulated(m, {{&s, &sim, &contrary}}, backend, quick());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, ExecStatus::Failed);
  // (The schedule is store-all's, named so; recompute-all frees A(a1) first.)
  EXPECT_EQ(r[0].message,
            "store-all: decided at run time to free A(a1) at instruction 2, where its simulated schedule has fwd a3");
}

}  // namespace
}  // namespace remat
