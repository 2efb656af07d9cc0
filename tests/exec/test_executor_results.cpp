// Out of memory, cancellation, progress and bad models: results, not crashes.
#include <atomic>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// The first instruction whose resident bytes exceed the limit is where the
// allocation fails (allocations only happen in instructions that raise the figure).
std::size_t first_over(const Simulation& sim, uint64_t limit) {
  for (std::size_t i = 0; i < sim.timeline.size(); ++i) {
    if (sim.timeline[i] > limit) return i;
  }
  return sim.timeline.size();
}

TEST(ExecutorOom, BelowPredictedPeakReportsTheInstruction) {
  for (const char* spec : {"chain:12:256", "mlp:4:64:8", "transformer:2:32:8:2"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    for (const char* strategy : {"store-all", "sqrt", "recompute-all"}) {
      SCOPED_TRACE(strategy);
      const Schedule s = schedule_of(m, strategy);
      const Simulation sim = simulate(m, s);
      CpuBackend cpu;
      ExecOptions o = quick();
      o.memory_limit = sim.peak_bytes - 1;
      const ExecResult r = execute(m, s, cpu, o);
      ASSERT_EQ(r.status, ExecStatus::OutOfMemory);
      EXPECT_EQ(r.oom_instruction, static_cast<int64_t>(first_over(sim, o.memory_limit)));
      EXPECT_EQ(r.oom_instruction, static_cast<int64_t>(sim.peak_index));
      EXPECT_GT(r.oom_needed, r.oom_free);
      EXPECT_LE(r.oom_free, o.memory_limit);
      EXPECT_NE(r.message.find("instruction " + std::to_string(r.oom_instruction)), std::string::npos) << r.message;
      EXPECT_EQ(cpu.live_bytes(), 0u);  // everything released

      o.memory_limit = sim.peak_bytes;  // exactly enough
      EXPECT_TRUE(execute(m, s, cpu, o).ok());
    }
  }
}

TEST(ExecutorOom, InputThatDoesNotFit) {
  const Model m = make_preset("mlp:2:16:4");
  CpuBackend cpu;
  ExecOptions o = quick();
  o.memory_limit = m.op(0).bytes - 1;
  const ExecResult r = execute(m, schedule_of(m, "store-all"), cpu, o);
  ASSERT_EQ(r.status, ExecStatus::OutOfMemory);
  EXPECT_EQ(r.oom_instruction, -1);
  EXPECT_EQ(r.oom_needed, m.op(0).bytes);
  EXPECT_EQ(r.oom_free, o.memory_limit);
}

TEST(ExecutorOom, OtherStrategiesStillRun) {
  const Model m = make_preset("chain:16:64");
  const Simulation store = simulate(m, schedule_of(m, "store-all"));
  const Simulation sqrt = simulate(m, schedule_of(m, "sqrt"));
  ASSERT_LT(sqrt.peak_bytes, store.peak_bytes);
  CpuBackend cpu;
  ExecOptions o = quick();
  o.memory_limit = sqrt.peak_bytes;
  const auto runs = execute_strategies(
      m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt"), schedule_of(m, "recompute-all")}, cpu, o);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, ExecStatus::OutOfMemory);
  EXPECT_EQ(runs[0].oom_instruction, static_cast<int64_t>(first_over(store, o.memory_limit)));
  EXPECT_TRUE(runs[1].ok()) << runs[1].message;
  EXPECT_EQ(runs[1].tracked_peak_bytes, sqrt.peak_bytes);
  EXPECT_TRUE(runs[2].ok()) << runs[2].message;
  EXPECT_EQ(runs[1].grad_hash, runs[2].grad_hash);
}

TEST(ExecutorProgress, MonotoneAndReachesOne) {
  const Model m = make_preset("transformer:1:16:4:2");
  CpuBackend cpu;
  std::vector<double> seen;
  ExecOptions o = quick();
  o.repeat = 2;
  o.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  const auto runs = execute_strategies(m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt")}, cpu, o);
  ASSERT_TRUE(runs[0].ok() && runs[1].ok());
  ASSERT_GT(seen.size(), 4u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LE(seen[i - 1], seen[i]) << "at call " << i;
  EXPECT_GE(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 1.0);
}

TEST(ExecutorCancel, FlagStopsThisAndTheRemainingStrategies) {
  const Model m = make_preset("mlp:4:32:4");
  CpuBackend cpu;
  std::atomic<bool> cancel{false};
  ExecOptions o = quick();
  o.cancel = &cancel;
  int calls = 0;
  o.progress = [&](double) {
    if (++calls == 3) cancel = true;  // as a GUI's button would, mid-run
    return true;
  };
  const auto runs = execute_strategies(m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt")}, cpu, o);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, ExecStatus::Cancelled);
  EXPECT_EQ(runs[1].status, ExecStatus::Cancelled);
  EXPECT_EQ(cpu.live_bytes(), 0u);
}

TEST(ExecutorCancel, ProgressReturningFalseCancels) {
  const Model m = make_preset("mlp:4:32:4");
  CpuBackend cpu;
  ExecOptions o = quick();
  o.progress = [](double f) { return f < 0.3; };
  const auto r = execute(m, schedule_of(m, "recompute-all"), cpu, o);
  EXPECT_EQ(r.status, ExecStatus::Cancelled);
  EXPECT_EQ(cpu.live_bytes(), 0u);
  // Already set before starting: nothing runs.
  std::atomic<bool> cancel{true};
  ExecOptions o2 = quick();
  o2.cancel = &cancel;
  EXPECT_EQ(execute(m, schedule_of(m, "store-all"), cpu, o2).status, ExecStatus::Cancelled);
}

TEST(ExecutorErrors, SimulateOnlyModelIsAnInputError) {
  const Model m = make_preset("chain:6");  // 1-byte activations: not whole floats
  CpuBackend cpu;
  try {
    (void)execute(m, schedule_of(m, "store-all"), cpu, quick());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model chain:6 has simulate-only ops: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("x (op 0, Input)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("more"), std::string::npos) << msg;
  }
}

TEST(ExecutorErrors, BadRepeatAndBadParamInit) {
  Model m = make_preset("mlp:1:4:2");
  CpuBackend cpu;
  ExecOptions o = quick();
  o.repeat = 0;
  EXPECT_THROW((void)execute(m, schedule_of(m, "store-all"), cpu, o), InputError);
  m.mutable_op(1).param_init = {std::make_shared<const std::vector<float>>(3, 0.0f),
                                std::make_shared<const std::vector<float>>(4, 0.0f)};
  EXPECT_THROW((void)make_host_data(m, 1), InputError);
}

TEST(ExecutorParams, ParamInitIsUsed) {
  Model m = make_preset("mlp:1:4:2");
  const auto gen = make_host_data(m, 3);
  m.mutable_op(1).param_init = {std::make_shared<const std::vector<float>>(16, 0.25f),
                                std::make_shared<const std::vector<float>>(4, -0.5f)};
  const auto given = make_host_data(m, 3);
  EXPECT_NE(gen.params[0], given.params[0]);
  EXPECT_EQ(given.params[0], std::vector<float>(16, 0.25f));
  EXPECT_EQ(given.params[1], std::vector<float>(4, -0.5f));
  EXPECT_EQ(gen.input, given.input);
}

}  // namespace
}  // namespace remat
