// Activations: known values, finite-difference backwards for every Act, and
// accumulate semantics.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/act_ref.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::act_name;
using test::act_ref;
using test::expect_grad_near;
using test::garbage;
using test::numeric_grad;
using test::random_floats;
using test::to_double;
using test::weighted_sum;

TEST(Activations, ForwardKnownValues) {
  const float x[] = {-1.0f, 0.0f, 0.5f, 2.0f};
  float y[4];
  act_fwd(Act::None, x, y, 4);
  EXPECT_EQ(std::vector<float>(y, y + 4), std::vector<float>(x, x + 4));
  act_fwd(Act::ReLU, x, y, 4);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0.0f, 0.0f, 0.5f, 2.0f}));
  act_fwd(Act::Tanh, x, y, 4);
  EXPECT_NEAR(y[0], -0.7615941559557649, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 0.46211715726000974, 1e-6);
  EXPECT_NEAR(y[3], 0.9640275800758169, 1e-6);
  // Exact GELU, x·Φ(x): distinguishes it from the tanh approximation, whose
  // value at 2 is 1.95459769.
  act_fwd(Act::GELU, x, y, 4);
  EXPECT_NEAR(y[0], -0.15865525393145707, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 0.34573123063700656, 1e-6);
  EXPECT_NEAR(y[3], 1.9544997361036416, 1e-6);
  // σ(x) = 1/(1+e^−x); SiLU = x·σ(x).
  act_fwd(Act::Sigmoid, x, y, 4);
  EXPECT_NEAR(y[0], 0.2689414213699951, 1e-6);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_NEAR(y[2], 0.6224593312018546, 1e-6);
  EXPECT_NEAR(y[3], 0.8807970779778823, 1e-6);
  act_fwd(Act::SiLU, x, y, 4);
  EXPECT_NEAR(y[0], -0.2689414213699951, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 0.3112296656009273, 1e-6);
  EXPECT_NEAR(y[3], 1.7615941559557646, 1e-6);
}

TEST(Activations, SigmoidAndSiLUSaturateWithoutNaN) {
  const float x[] = {-200.0f, 200.0f};
  float y[2];
  act_fwd(Act::Sigmoid, x, y, 2);
  EXPECT_EQ(y[0], 0.0f);  // e^200 overflows to inf: 1/inf
  EXPECT_EQ(y[1], 1.0f);
  act_fwd(Act::SiLU, x, y, 2);
  EXPECT_EQ(y[0], -0.0f);
  EXPECT_EQ(y[1], 200.0f);
  const float dy[] = {1.0f, 1.0f};
  float dx[2];
  act_bwd(Act::SiLU, x, dy, dx, 2, false);
  EXPECT_EQ(dx[0], 0.0f);
  EXPECT_EQ(dx[1], 1.0f);
}

TEST(Activations, ForwardMayRunInPlace) {
  auto v = random_floats(32, 40);
  std::vector<float> expected(v.size());
  act_fwd(Act::GELU, v.data(), expected.data(), 32);
  act_fwd(Act::GELU, v.data(), v.data(), 32);
  EXPECT_EQ(v, expected);
}

class ActTest : public testing::TestWithParam<Act> {};

// What act_bwd reads: the output for ReLU, Tanh and Sigmoid, the input otherwise.
std::vector<float> saved_for(Act act, const std::vector<float>& x) {
  if (act != Act::ReLU && act != Act::Tanh && act != Act::Sigmoid) return x;
  std::vector<float> y(x.size());
  act_fwd(act, x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

TEST_P(ActTest, BackwardMatchesFiniteDifferences) {
  const Act act = GetParam();
  // Wide enough to reach Tanh's and GELU's saturated tails.
  const auto x = random_floats(200, 41, -4.0f, 4.0f);
  const auto dy = random_floats(x.size(), 42);
  const auto saved = saved_for(act, x);
  std::vector<float> dx(x.size());
  act_bwd(act, saved.data(), dy.data(), dx.data(), static_cast<int64_t>(x.size()), false);

  auto xd = to_double(x);
  auto loss = [&] {
    std::vector<double> y(xd.size());
    for (size_t i = 0; i < xd.size(); ++i) y[i] = act_ref(act, xd[i]);
    return weighted_sum(y, dy);
  };
  expect_grad_near(dx, numeric_grad(xd, loss), "dx");
}

TEST_P(ActTest, AccumulateFalseOverwritesTrueAdds) {
  const Act act = GetParam();
  const auto x = random_floats(64, 43);
  const auto dy = random_floats(x.size(), 44);
  const auto saved = saved_for(act, x);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> fresh(x.size(), 0.0f);
  act_bwd(act, saved.data(), dy.data(), fresh.data(), n, false);
  auto over = garbage(x.size());
  act_bwd(act, saved.data(), dy.data(), over.data(), n, false);
  EXPECT_EQ(over, fresh);
  const auto start = garbage(x.size());
  auto added = start;
  act_bwd(act, saved.data(), dy.data(), added.data(), n, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Acts, ActTest, testing::Values(Act::None, Act::ReLU, Act::Tanh, Act::GELU, Act::Sigmoid, Act::SiLU),
                         act_name);

}  // namespace
}  // namespace remat::cpu
