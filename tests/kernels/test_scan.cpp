// torch.cumsum's CPU kernels (scan.cpp): the forward against a float64 sum in
// axis order rounded per output, for the axis first, inside and last; PyTorch's
// own bits where a float accumulator would differ (torch 1.13 and 2.6 give
// [1e8, 1e8, 1, 2] and, for the gradient, [2, 1, 1e8, 1e8]: they accumulate
// in double); the backward as the reversed sum, checked against finite
// differences of Σ w·cumsum(x), and accumulating into dx.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::expect_grad_near;
using test::numeric_grad;
using test::random_floats;
using test::to_double;

float at(const std::vector<float>& v, const ScanGeom& g, int64_t o, int64_t i, int64_t j) {
  return v[static_cast<std::size_t>((o * g.len + i) * g.inner + j)];
}

TEST(Cumsum, ForwardIsTheDoubleRunningSumAlongTheAxisRoundedPerOutput) {
  for (const ScanGeom g : {ScanGeom{1, 9, 1}, ScanGeom{3, 5, 4}, ScanGeom{2, 1, 3}, ScanGeom{1, 6, 5}, ScanGeom{4, 7, 1}}) {
    SCOPED_TRACE(std::to_string(g.outer) + "x" + std::to_string(g.len) + "x" + std::to_string(g.inner));
    const auto n = static_cast<std::size_t>(g.outer * g.len * g.inner);
    const std::vector<float> x = random_floats(n, 11);
    std::vector<float> y(n, -7.0f);
    cumsum_fwd(g, x.data(), y.data());
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t j = 0; j < g.inner; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < g.len; ++i) {
          sum += at(x, g, o, i, j);
          const float want = static_cast<float>(sum);
          const float got = at(y, g, o, i, j);
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << o << "," << i << "," << j;
        }
      }
  }
}

TEST(Cumsum, MatchesPyTorchsBitsWhereAFloatAccumulatorWouldNot) {
  const ScanGeom g{1, 4, 1};
  const std::vector<float> x = {1e8f, 1.0f, -1e8f, 1.0f};
  std::vector<float> y(4);
  cumsum_fwd(g, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{1e8f, 1e8f, 1.0f, 2.0f}));  // a float sum ends at 1
  const std::vector<float> dy = {1.0f, -1e8f, 1.0f, 1e8f};
  std::vector<float> dx(4, 5.0f);
  cumsum_bwd(g, dy.data(), dx.data(), false);
  EXPECT_EQ(dx, (std::vector<float>{2.0f, 1.0f, 1e8f, 1e8f}));
}

TEST(Cumsum, BackwardIsTheGradientOfTheRunningSumAndAccumulates) {
  const ScanGeom g{2, 5, 3};
  const auto n = static_cast<std::size_t>(g.outer * g.len * g.inner);
  const std::vector<float> x = random_floats(n, 3), w = random_floats(n, 4);
  std::vector<double> xd = to_double(x);
  // Σ w·cumsum(x) in float64, as a function of x.
  const auto objective = [&] {
    double s = 0;
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t j = 0; j < g.inner; ++j) {
        double run = 0;
        for (int64_t i = 0; i < g.len; ++i) {
          const auto k = static_cast<std::size_t>((o * g.len + i) * g.inner + j);
          run += xd[k];
          s += run * w[k];
        }
      }
    return s;
  };
  const std::vector<double> want = numeric_grad(xd, objective);
  std::vector<float> dx(n, 1234.0f);
  cumsum_bwd(g, w.data(), dx.data(), false);
  expect_grad_near(dx, want, "dx");
  std::vector<float> twice = dx;
  cumsum_bwd(g, w.data(), twice.data(), true);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(twice[i], dx[i] + dx[i]) << i;
}

}  // namespace
}  // namespace remat::cpu
