// The whole step's memory: weights, their gradients, the optimizer's state
// (torch.optim's buffers) and fp32 master weights, derived per op from shapes.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/analysis/step_memory.h"
#include "core/strategies/registry.h"
#include "tests/support/model_builders.h"

using namespace remat;
using remat::testing::make_op;

namespace {

// x [4,8] -> Linear 8->8 with bias (72 weights) -> LayerNorm (gamma, beta: 16
// weights) -> MSE loss: 88 trained weights.
Model linear_ln(DType dtype) {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 8}, dtype));
  m.add(make_op(OpKind::Linear, {0}, {4, 8}, dtype));
  m.add(make_op(OpKind::LayerNorm, {1}, {}, dtype));
  m.add(make_op(OpKind::MSELoss, {2}, {}, dtype));
  m.finalize();
  return m;
}

constexpr uint64_t kWeights = 8 * 8 + 8 + 2 * 8;

}  // namespace

TEST(StepMemory, OptimizerBuffersAreTorchOptims) {
  EXPECT_EQ(optimizer_buffers(Optimizer::SGD), 0);
  EXPECT_EQ(optimizer_buffers(Optimizer::Momentum), 1);  // momentum_buffer
  EXPECT_EQ(optimizer_buffers(Optimizer::Adam), 2);      // exp_avg, exp_avg_sq
  EXPECT_EQ(optimizer_buffers(Optimizer::AdamW), 2);
}

TEST(StepMemory, Fp32WeightsGradientsAndAdamState) {
  const Model m = linear_ln(DType::F32);
  const StepMemory s = step_memory(m, Optimizer::Adam, 1000);
  EXPECT_EQ(s.parameters, kWeights * 4);
  EXPECT_EQ(s.parameter_grads, kWeights * 4);
  EXPECT_EQ(s.master_weights, 0u);  // fp32 weights are their own master copy
  EXPECT_EQ(s.optimizer_state, 2 * kWeights * 4);
  EXPECT_EQ(s.baseline(), 4 * kWeights * 4);
  EXPECT_EQ(s.total(), 4 * kWeights * 4 + 1000);
  EXPECT_EQ(step_memory(m, Optimizer::SGD, 0).optimizer_state, 0u);
  EXPECT_EQ(step_memory(m, Optimizer::Momentum, 0).optimizer_state, kWeights * 4);
}

TEST(StepMemory, HalfWeightsGetFp32MasterWeightsAndFp32State) {
  const Model m = linear_ln(DType::BF16);
  const StepMemory s = step_memory(m, Optimizer::AdamW, 0);
  EXPECT_EQ(s.parameters, kWeights * 2);
  EXPECT_EQ(s.parameter_grads, kWeights * 2);
  EXPECT_EQ(s.master_weights, kWeights * 4);
  EXPECT_EQ(s.optimizer_state, 2 * kWeights * 4);
}

TEST(StepMemory, BatchNormRunningStatisticsAreHeldButNotTrained) {
  // x [2,3,4,4] -> BatchNorm over 3 channels: gamma and beta (6 trained
  // weights) and running mean/var (6 fp32 buffers) -> MSE loss.
  Model m;
  m.add(make_op(OpKind::Input, {}, {2, 3, 4, 4}));
  m.add(make_op(OpKind::BatchNorm, {0}));
  m.add(make_op(OpKind::MSELoss, {1}));
  m.finalize();
  const StepMemory s = step_memory(m, Optimizer::Adam, 0);
  EXPECT_EQ(s.parameters, 6 * 4 + 6 * 4);
  EXPECT_EQ(s.parameter_grads, 6 * 4u);
  EXPECT_EQ(s.optimizer_state, 2 * 6 * 4u);
}

TEST(StepMemory, ActivationsAreTheStrategysPeak) {
  const Model m = make_preset("mlp:4:64:8");
  const Simulation sa = simulate(m, make_strategy("store-all")->schedule(m));
  const Simulation ra = simulate(m, make_strategy("recompute-all")->schedule(m));
  const StepMemory a = step_memory(m, Optimizer::Adam, sa.peak_bytes);
  const StepMemory b = step_memory(m, Optimizer::Adam, ra.peak_bytes);
  EXPECT_EQ(a.baseline(), b.baseline());  // no strategy changes the baseline
  EXPECT_EQ(a.total() - b.total(), sa.peak_bytes - ra.peak_bytes);
  EXPECT_EQ(a.parameters, m.param_bytes());
}

TEST(StepMemory, NoteNamesTheLargestPartUnlessItIsTheActivations) {
  StepMemory m;
  m.optimizer_state = 62;
  m.parameters = 19;
  m.parameter_grads = 19;
  EXPECT_EQ(dominant_part_note(m), "optimizer state is 62% of the step: checkpointing changes only the activations");
  m.activations = 100;
  EXPECT_EQ(dominant_part_note(m), "");
}

TEST(StepMemory, UnknownOptimizerFlagNamesFlagAndChoices) {
  EXPECT_EQ(optimizer_flag(""), Optimizer::SGD);
  EXPECT_EQ(optimizer_flag("adamw"), Optimizer::AdamW);
  try {
    optimizer_flag("lion");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--optimizer: unknown optimizer 'lion' (expected sgd|momentum|adam|adamw)");
  }
}
