// The equality rule shared by `remat run` and the window: every byte of the
// loss and of each parameter gradient.
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "core/exec/same_result.h"

namespace remat {
namespace {

ExecResult ran(float loss, std::vector<std::vector<float>> grads) {
  ExecResult r;
  r.loss = loss;
  r.param_grads = std::move(grads);
  return r;
}

TEST(SameLossAndGrads, EveryByteCounts) {
  const ExecResult ref = ran(0.5f, {{1.0f, 2.0f}, {3.0f}});
  EXPECT_TRUE(same_loss_and_grads(ran(0.5f, {{1.0f, 2.0f}, {3.0f}}), ref));
  // One ulp off in one gradient element.
  EXPECT_FALSE(same_loss_and_grads(ran(0.5f, {{1.0f, std::nextafter(2.0f, 3.0f)}, {3.0f}}), ref));
  // One ulp off in the loss.
  EXPECT_FALSE(same_loss_and_grads(ran(std::nextafter(0.5f, 1.0f), {{1.0f, 2.0f}, {3.0f}}), ref));
  // Equal values with different bits are not "bit-identical".
  EXPECT_FALSE(same_loss_and_grads(ran(0.5f, {{-0.0f, 2.0f}, {3.0f}}), ran(0.5f, {{0.0f, 2.0f}, {3.0f}})));
  // The same NaN bits are.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(same_loss_and_grads(ran(nan, {}), ran(nan, {})));
  // A missing tensor or a shorter one differs.
  EXPECT_FALSE(same_loss_and_grads(ran(0.5f, {{1.0f, 2.0f}}), ref));
  EXPECT_FALSE(same_loss_and_grads(ran(0.5f, {{1.0f}, {3.0f}}), ref));
}

TEST(SameLossAndGrads, OnlyCompletedRunsCompare) {
  const ExecResult ref = ran(0.5f, {{1.0f}});
  ExecResult oom = ran(0.5f, {{1.0f}});
  oom.status = ExecStatus::OutOfMemory;
  EXPECT_FALSE(same_loss_and_grads(oom, ref));
  EXPECT_FALSE(same_loss_and_grads(ref, oom));
}

// A non-deterministic backward (--nondeterministic-backward) is held to the
// loss alone: its bits, whatever the gradients.
TEST(SameLoss, TheLossBitsAloneOfCompletedRuns) {
  const ExecResult ref = ran(0.5f, {{1.0f, 2.0f}});
  EXPECT_TRUE(same_loss(ran(0.5f, {{1.0f, std::nextafter(2.0f, 3.0f)}}), ref));
  EXPECT_TRUE(same_loss(ran(0.5f, {}), ref));
  EXPECT_FALSE(same_loss(ran(std::nextafter(0.5f, 1.0f), {{1.0f, 2.0f}}), ref));
  EXPECT_FALSE(same_loss(ran(0.0f, {}), ran(-0.0f, {})));
  ExecResult oom = ran(0.5f, {{1.0f, 2.0f}});
  oom.status = ExecStatus::OutOfMemory;
  EXPECT_FALSE(same_loss(oom, ref));
  EXPECT_FALSE(same_loss(ref, oom));
}

// The verdict `remat run` prints and exits by: bitwise where it can be; a
// compressed strategy by its error; a non-deterministic backward by the loss's
// bits alone, never the gradients'.
TEST(Sameness, EachResultIsHeldToItsRule) {
  const ExecResult ref = ran(0.5f, {{1.0f, 2.0f}});
  const ExecResult off_grad = ran(0.5f, {{1.0f, std::nextafter(2.0f, 3.0f)}});
  const ExecResult off_loss = ran(std::nextafter(0.5f, 1.0f), {{1.0f, 2.0f}});
  EXPECT_EQ(sameness(ran(0.5f, {{1.0f, 2.0f}}), ref), Sameness::Bitwise);
  EXPECT_EQ(sameness(off_grad, ref), Sameness::Differs);
  EXPECT_EQ(sameness(off_loss, ref), Sameness::Differs);

  ExecResult compressed = off_loss;
  compressed.compressed = true;
  EXPECT_EQ(sameness(compressed, ref), Sameness::Compressed);

  // Non-deterministic (on this side or the reference's): the loss's bits decide.
  auto nondet = [](ExecResult r) {
    r.nondeterministic = {"cuDNN convolution backward: ..."};
    return r;
  };
  EXPECT_EQ(sameness(nondet(off_grad), ref), Sameness::LossOnly);
  EXPECT_EQ(sameness(off_grad, nondet(ref)), Sameness::LossOnly);
  EXPECT_EQ(sameness(nondet(off_loss), nondet(ref)), Sameness::Differs);
  // Equal bits anyway (cuDNN ranked a deterministic algorithm first, or the sums landed alike).
  EXPECT_EQ(sameness(nondet(ran(0.5f, {{1.0f, 2.0f}})), nondet(ref)), Sameness::Bitwise);
  EXPECT_EQ(sameness(nondet(compressed), ref), Sameness::Compressed);

  ExecResult oom = ref;
  oom.status = ExecStatus::OutOfMemory;
  EXPECT_EQ(sameness(ref, oom), Sameness::NoReference);
  EXPECT_EQ(sameness(oom, ref), Sameness::Differs);
}

}  // namespace
}  // namespace remat
