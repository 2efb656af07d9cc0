// The executor shares an Add's gradient as the memory model says
// (docs/memory-model.md, "An Add's gradient"): the inputs' G is G(v)'s very
// buffer, a gradient gets a copy of its own before a part is added to a
// shared buffer, tracked bytes equal the prediction at every instruction,
// and the gradients are bitwise those of store-all.
#include <gtest/gtest.h>

#include "tests/exec/grad_sharing_util.h"
#include "tests/support/model_builders.h"

namespace remat {
namespace {

using testing::expect_store_alls_gradients;
using testing::expect_tracked_is_simulated;
using testing::GradPointers;
using testing::make_op;
using testing::quick;
using testing::schedule_of;

// x -> a, b = Linear(x) -> t = Tanh(a) -> z = a + b -> s = z + t -> MSE:
// bwd s shares G(s)'s buffer with z and t, bwd z with a and b, and bwd t
// adds to G(a) while G(b) and G(t) still share it (out of place).
Model residual() {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 8}));
  m.add(make_op(OpKind::Linear, {0}, {4, 8}));
  m.add(make_op(OpKind::Linear, {0}, {4, 8}));
  m.add(make_op(OpKind::Tanh, {1}));
  m.add(make_op(OpKind::Add, {1, 2}));
  m.add(make_op(OpKind::Add, {4, 3}));
  m.add(make_op(OpKind::MSELoss, {5}));
  m.finalize();
  return m;
}

}  // namespace

TEST(AddGradientExec, InputsGetTheAddsBufferItself) {
  const Model m = residual();
  CpuBackend cpu;
  GradPointers rec(cpu);
  const Schedule s = schedule_of(m, "store-all");
  const ExecResult r = execute(m, s, rec, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  // The Adds' kernels see no G for a shared input: nothing to write.
  EXPECT_EQ(rec.dx.at({5, 4}), nullptr);
  EXPECT_EQ(rec.dx.at({5, 3}), nullptr);
  EXPECT_EQ(rec.dx.at({4, 1}), nullptr);
  EXPECT_EQ(rec.dx.at({4, 2}), nullptr);
  // ... and each backward after reads G(s)'s buffer as its own G.
  const void* shared = rec.dy.at(5);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(rec.dy.at(4), shared);
  EXPECT_EQ(rec.dy.at(3), shared);
  EXPECT_EQ(rec.dy.at(2), shared);
  // bwd t adds to G(a) in a buffer of its own: G(b) still shares G(s)'s.
  EXPECT_NE(rec.dx.at({3, 1}), nullptr);
  EXPECT_NE(rec.dx.at({3, 1}), shared);
  EXPECT_EQ(rec.dy.at(1), rec.dx.at({3, 1}));
  // Tracked bytes after each instruction are the simulator's.
  const Simulation sim = expect_tracked_is_simulated(rec, m, s);
  EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
}

// The gradients a shared buffer carries are the values a buffer per input
// carried: every strategy's equal store-all's bit for bit, and G(a), made of
// G(s) + tanh's part, reaches the parameters the same way.
TEST(AddGradientExec, EveryStrategyGivesStoreAllsGradientsBitForBit) {
  const Model m = residual();
  expect_store_alls_gradients(m, {"recompute-all", "sqrt", "every-k:2", "manual:3", "auto", "dtr:700", "optimal:700"});
}

}  // namespace remat
