// The run session (core/exec/run_session.h), the one path of `remat run` and
// the window's Run: the model checked once, each strategy made and simulated
// once (counted process-wide by core/base/work_counters.h), the reference added
// under the same instruction limit, the recorders wrapping the backend.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/run_session.h"
#include "core/exec/same_result.h"
#include "core/base/work_counters.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;

RunSessionOptions on_cpu() {
  RunSessionOptions o;
  o.backend = BackendKind::Cpu;
  return o;
}

WorkCounts since(const WorkCounts& before) {
  const WorkCounts now = work_counts();
  return {now.executability_checks - before.executability_checks, now.strategies_made - before.strategies_made,
          now.simulations - before.simulations};
}

// Before the session, `remat run --strategy sqrt,recompute-all` checked the
// model 3 + N times (the command, execute_strategies, make_host_data, each
// execute_loaded), made each strategy twice and simulated each twice.
TEST(RunSession, ByNameChecksOnceAndMakesAndSimulatesEachStrategyOnce) {
  const Model m = make_preset("mlp:3:16:4");
  const WorkCounts before = work_counts();
  RunSession session(m, {"sqrt", "recompute-all"}, on_cpu());
  const RunSessionResult r = session.run(quick());
  const WorkCounts work = since(before);
  EXPECT_EQ(work.executability_checks, 1u);
  EXPECT_EQ(work.strategies_made, 3u);  // store-all, sqrt, recompute-all
  EXPECT_EQ(work.simulations, 3u);

  EXPECT_EQ(r.backend, "cpu");
  ASSERT_TRUE(r.reference_added);
  EXPECT_EQ(r.reference, 0u);
  ASSERT_EQ(r.plans.size(), 3u);
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.plans[0].name, "store-all");
  EXPECT_EQ(r.plans[1].name, "sqrt");
  EXPECT_EQ(r.plans[2].name, "recompute-all");
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(r.results[i].ok()) << r.results[i].message;
    EXPECT_EQ(r.results[i].strategy, r.plans[i].name);
    EXPECT_EQ(r.results[i].tracked_peak_bytes, r.plans[i].sim.peak_bytes) << r.plans[i].name;
    EXPECT_TRUE(same_loss_and_grads(r.results[i], r.reference_result())) << r.plans[i].name;
  }
  EXPECT_FALSE(r.data.params.empty());  // what the backend loaded, for --dump
  EXPECT_TRUE(r.recorded.empty());      // not asked for
  EXPECT_TRUE(r.tracked.empty());
}

// The window hands over runs it simulated already: they are not made or
// simulated again; only the reference it lacks is.
TEST(RunSession, SimulatedRunsAreTakenAsTheyAre) {
  const Model m = make_preset("mlp:3:16:4");
  std::vector<StrategyRun> runs = simulate_strategies(m, {"sqrt", "recompute-all"});
  const std::vector<uint64_t> sqrt_timeline = runs[0].sim.timeline;
  const WorkCounts before = work_counts();
  RunSessionOptions o = on_cpu();
  o.record_tracked = true;
  RunSession session = RunSession::of_simulated(m, std::move(runs), o);
  const RunSessionResult r = session.run(quick());
  const WorkCounts work = since(before);
  EXPECT_EQ(work.executability_checks, 1u);
  EXPECT_EQ(work.strategies_made, 1u);  // store-all, the reference
  EXPECT_EQ(work.simulations, 1u);

  ASSERT_EQ(r.plans.size(), 3u);
  EXPECT_TRUE(r.reference_added);
  EXPECT_EQ(r.plans[0].spec, "store-all");
  EXPECT_EQ(r.plans[1].spec, "sqrt");
  // The tracked bytes after each instruction are the simulated timeline.
  ASSERT_EQ(r.tracked.size(), 3u);
  EXPECT_EQ(r.tracked[1], sqrt_timeline);
  EXPECT_EQ(r.tracked[0], r.plans[0].sim.timeline);
}

// store-all chosen: it is the reference, in its place, not added.
TEST(RunSession, AChosenStoreAllIsTheReference) {
  const Model m = make_preset("chain:6:16");
  RunSessionOptions o = on_cpu();
  o.record_trace = true;
  RunSession session(m, {"sqrt", "store-all"}, o);
  const RunSessionResult r = session.run(quick());
  EXPECT_FALSE(r.reference_added);
  ASSERT_EQ(r.plans.size(), 2u);
  EXPECT_EQ(r.reference, 1u);
  EXPECT_EQ(r.reference_result().strategy, "store-all");
  EXPECT_EQ(r.recorded.size(), 2u);  // one recording per strategy, for --trace
  // The recorder's per-instruction figures skip the resident-set read (time
  // between instructions); the run's own figures keep it.
  for (const auto& run : r.recorded) {
    ASSERT_FALSE(run.intervals.empty());
    for (const MemoryStats& s : run.intervals) EXPECT_EQ(s.device_used, 0u);
  }
  EXPECT_GT(r.reference_result().memory.device_used, 0u);
}

// The instruction limit holds for every schedule the session makes, the
// reference's included: the CLI applied it to the reference, the window did not.
TEST(RunSession, TheReferenceIsUnderTheInstructionLimit) {
  const Model m = make_preset("chain:8:16");
  const uint64_t store_all = make_strategy("store-all")->schedule(m).code.size();
  RunSessionOptions o = on_cpu();
  o.limit.max = store_all - 1;
  o.limit.how_to_change = "--max-instructions N changes it";
  RunSession session(m, {"recompute-all"}, o);
  try {
    session.plan();
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("strategy 'store-all': ", 0), 0u) << e.what();
  }
}

TEST(RunSession, ABadSpecOrASimulateOnlyModelFailsBeforeAnyWork) {
  EXPECT_THROW(RunSession(make_preset("chain:8:16"), {"no-such-strategy"}, on_cpu()), InputError);
  try {
    RunSession session(make_preset("chain:8"), {"sqrt"}, on_cpu());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("simulate-only ops"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
