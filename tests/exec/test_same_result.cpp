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

}  // namespace
}  // namespace remat
