// The executor shares a Reshape's gradient as the memory model says
// (docs/memory-model.md, "Gradients PyTorch shares"): a Reshape's input, view
// or copy, gets G(v)'s very buffer (its kernel sees no G for it and writes
// nothing), a gradient gets a copy of its own before a part is added to a
// shared buffer, tracked bytes equal the prediction at every instruction, and
// the gradients are bitwise those of store-all.
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

// x [4,8] -> a = Linear(x) -> t = Tanh(a); r = Reshape(a) [2,16] (a view)
// -> c = Reshape(r) [4,8] (a copy) -> l = Linear(c) -> z = l + t -> MSE.
// bwd z shares G(z)'s buffer with l and t; bwd l makes G(c), which bwd c
// hands to r and bwd r to a; bwd t adds to G(a) while G(t) still shares G(z)'s
// buffer (G(a) has G(c)'s: in place), then a Linear reads it.
// Ids: 1 a, 2 t, 3 r, 4 c, 5 l, 6 z, 7 loss.
Model reshaped() { return testing::reshaped_into_add(true); }

}  // namespace

TEST(ViewGradientExec, AReshapesInputGetsItsBufferItself) {
  const Model m = reshaped();
  ASSERT_TRUE(m.op(3).view);
  ASSERT_FALSE(m.op(4).view);
  CpuBackend cpu;
  GradPointers rec(cpu);
  const Schedule s = schedule_of(m, "store-all");
  const ExecResult r = execute(m, s, rec, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  // The Reshapes' kernels see no G for their input: nothing to copy.
  EXPECT_EQ(rec.dx.at({4, 3}), nullptr);
  EXPECT_EQ(rec.dx.at({3, 1}), nullptr);
  // bwd l wrote G(c); bwd c and bwd r read that buffer as their G.
  const void* made = rec.dx.at({5, 4});
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(rec.dy.at(4), made);
  EXPECT_EQ(rec.dy.at(3), made);
  // bwd t adds into G(a), which is that buffer too: G(t) shares G(z)'s, not
  // G(a)'s, so the part is added in place; bwd a reads it.
  EXPECT_EQ(rec.dx.at({2, 1}), made);
  EXPECT_EQ(rec.dy.at(1), made);
  EXPECT_EQ(rec.dy.at(2), rec.dy.at(6));  // the Add's sharing, as before
  // Tracked bytes after each instruction are the simulator's.
  const Simulation sim = expect_tracked_is_simulated(rec, m, s);
  EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
}

// The Add's input shares with the Reshapes down to a, and bwd t adds to G(a)
// while G(t) still shares it: out of place, into a copy of its own.
TEST(ViewGradientExec, APartAddedToASharedBufferGoesToACopy) {
  const Model m = testing::reshaped_into_add(false);  // 1 a, 2 t, 3 r, 4 c, 5 z, 6 loss
  CpuBackend cpu;
  GradPointers rec(cpu);
  const Schedule s = schedule_of(m, "store-all");
  const ExecResult r = execute(m, s, rec, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  const void* shared = rec.dy.at(5);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(rec.dy.at(4), shared);
  EXPECT_EQ(rec.dy.at(3), shared);
  EXPECT_EQ(rec.dy.at(2), shared);
  EXPECT_NE(rec.dx.at({2, 1}), nullptr);
  EXPECT_NE(rec.dx.at({2, 1}), shared);
  EXPECT_EQ(rec.dy.at(1), rec.dx.at({2, 1}));
  const Simulation sim = expect_tracked_is_simulated(rec, m, s);
  EXPECT_EQ(sim.peak_bytes, 4 * 128u);  // tests/core/test_view_gradient.cpp derives the timeline
}

// The values a shared buffer carries are those a buffer per input carried:
// every strategy's gradients equal store-all's bit for bit.
TEST(ViewGradientExec, EveryStrategyGivesStoreAllsGradientsBitForBit) {
  const Model m = reshaped();
  expect_store_alls_gradients(m, {"recompute-all", "sqrt", "every-k:2", "manual:4", "auto", "dtr:900", "optimal:900"});
}

}  // namespace remat
