// Every strategy on every preset: the measured (tracked) peak equals the
// simulator's prediction to the byte, and loss and gradients are bit-identical
// to store-all on the same backend.
#include <cstring>

#include <gtest/gtest.h>

#include "core/strategies/first_step_bound.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

struct Case {
  std::string model;
  std::string manual;  // a checkpoint set that fits the model
};

std::vector<std::string> strategies_for(const Case& c) {
  std::vector<std::string> out;
  for (const auto& s : strategy_catalog()) {
    if (s.argument.empty()) out.push_back(s.name);
  }
  out.push_back("every-k:2");
  out.push_back("every-k:3");
  out.push_back(c.manual);
  return out;
}

class AllStrategies : public ::testing::TestWithParam<Case> {};

TEST_P(AllStrategies, PeakMatchesSimulationAndResultsMatchStoreAll) {
  const Model m = make_preset(GetParam().model);
  CpuBackend cpu;
  const ExecResult base = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  ASSERT_FALSE(base.param_grads.empty());
  for (const auto& spec : strategies_for(GetParam())) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const Simulation sim = simulate(m, s);
    const ExecResult r = execute(m, s, cpu, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
    // The allocator's peak: the held buffers and the tensors, as it allocated them.
    const bool exact = HostAllocator::default_exact();
    EXPECT_EQ(r.memory.allocator_peak, testing::cpu_held_bytes(m, exact) + testing::rounded_tensor_peak(m, s, exact));
    EXPECT_EQ(r.memory.baseline, r.baseline_bytes);
    const ScratchFloats scratch = model_scratch(m);
    uint64_t scratch_floats = 0;
    for (const int64_t f : scratch) scratch_floats += static_cast<uint64_t>(f);
    EXPECT_EQ(r.memory.scratch, 4 * scratch_floats);
    EXPECT_LE(r.memory.tensors, r.tracked_peak_bytes);  // what was asked at the allocator's peak
    EXPECT_EQ(r.memory.workspace, 0u);
    EXPECT_GE(r.memory.reserved_peak, r.memory.allocator_peak);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0) << r.loss << " vs " << base.loss;
    ASSERT_EQ(r.param_grads.size(), base.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k) {
      ASSERT_EQ(r.param_grads[k].size(), base.param_grads[k].size());
      EXPECT_EQ(std::memcmp(r.param_grads[k].data(), base.param_grads[k].data(), 4 * r.param_grads[k].size()), 0)
          << "parameter tensor " << k;
    }
    EXPECT_EQ(r.grad_hash, base.grad_hash);
    EXPECT_EQ(r.instr_ms.size(), s.code.size());
    // Each instruction's host time lies within its run's issue time.
    ASSERT_EQ(r.instr_issue_ms.size(), s.code.size());
    double issued = 0, runs = 0;
    for (const double ms : r.instr_issue_ms) issued += ms;
    for (const double ms : r.issue_ms) runs += ms;
    EXPECT_LE(issued, runs / static_cast<double>(r.issue_ms.size()) + 1e-9);
    EXPECT_GT(issued, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, AllStrategies,
                         ::testing::Values(Case{"chain:12:256", "manual:3,7"}, Case{"chain:5:4", "manual:2"},
                                           Case{"mlp:4:64:8", "manual:2,5"},
                                           Case{"transformer:2:32:8:2", "manual:6,12,18"},
                                           // Conv, BatchNorm (aux), MaxPool (aux), GlobalAvgPool, a flatten view
                                           Case{"resnet:10:4:32:2:5", "manual:4,12"},
                                           Case{"resnet:18:2:32:2:3", "manual:3,10,25"},
                                           // Embedding, a learned position table, batched MatMul on
                                           // strided views (aux copies), scale, causal mask, dropout
                                           Case{"gpt:2:32:4:8:2:f32:50", "manual:25,31,53"},
                                           Case{"gpt:1:16:2:5:1:f32:11", "manual:25"}),
                         [](const auto& info) {
                           std::string s = info.param.model;
                           for (char& c : s) if (c == ':') c = '_';
                           return s;
                         });

// The gradient is really computed: not all zeros, and a different seed gives different values.
TEST(Executor, GradientsDependOnSeed) {
  const Model m = make_preset("mlp:3:16:4");
  CpuBackend cpu;
  const auto a = execute(m, schedule_of(m, "sqrt"), cpu, quick(1));
  const auto b = execute(m, schedule_of(m, "sqrt"), cpu, quick(2));
  ASSERT_TRUE(a.ok() && b.ok());
  bool nonzero = false;
  for (float g : a.param_grads[0]) nonzero |= g != 0.0f;
  EXPECT_TRUE(nonzero);
  EXPECT_NE(a.grad_hash, b.grad_hash);
  EXPECT_NE(a.loss, b.loss);
}

TEST(Executor, RepeatsAreDeterministic) {
  const Model m = make_preset("transformer:1:16:4:2");
  CpuBackend cpu;
  ExecOptions o = quick();
  o.repeat = 3;
  const auto a = execute(m, schedule_of(m, "recompute-all"), cpu, o);
  const auto b = execute(m, schedule_of(m, "recompute-all"), cpu, quick());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.run_ms.size(), 3u);
  // The host's issue time of each run: on the CPU the instructions run as they
  // are issued, so it spans the run's marks (and the last instruction's return after them).
  ASSERT_EQ(a.issue_ms.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) EXPECT_GE(a.issue_ms[r], a.run_ms[r]) << r;
  EXPECT_GE(a.issue_time_ms, a.time_ms);
  EXPECT_GT(a.issue_time_ms, 0.0);
  EXPECT_EQ(a.grad_hash, b.grad_hash);
  EXPECT_GT(a.time_ms, 0.0);
  EXPECT_GT(a.recompute_ms, 0.0);
  EXPECT_GT(a.recompute_share, 0.0);
  EXPECT_LT(a.recompute_share, 1.0);
}

// The first backward step's schedule (first_step_bound.h) on a small GPT
// whose logits make the first backward step the peak, at 85%, 70% and 60% of
// store-all's: where it fits it recomputes residual sums (from the kept
// output projections, the dropout masks made again) and, lower, attention
// cores; run on the CPU, its tracked peak is the simulator's and its loss and
// gradients are store-all's bit for bit.
TEST(Executor, FirstStepScheduleMatchesStoreAll) {
  const Model m = make_preset("gpt:3:32:4:16:1:f32:1000");
  CpuBackend cpu;
  const ExecResult base = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  const uint64_t high = simulate(m, schedule_of(m, "store-all")).peak_bytes;
  int sums = 0;
  for (int percent : {85, 70, 60}) {
    SCOPED_TRACE(percent);
    const FirstStepBound b = first_step_bound(m, high * static_cast<uint64_t>(percent) / 100);
    ASSERT_TRUE(b.fits);
    for (int v : b.recomputed) sums += m.op(v).kind == OpKind::Add && m.op(v).inputs.size() == 2;
    const Schedule s = with_frees(m, b.compute, "first-step");
    const Simulation sim = simulate(m, s);
    EXPECT_EQ(sim.recompute_flops, b.recompute_flops);
    const ExecResult r = execute(m, s, cpu, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0) << r.loss << " vs " << base.loss;
    ASSERT_EQ(r.param_grads.size(), base.param_grads.size());
    EXPECT_EQ(r.grad_hash, base.grad_hash);
  }
  EXPECT_GE(sums, 10);
}

}  // namespace
}  // namespace remat
