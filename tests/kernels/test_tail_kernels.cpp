// The tail kinds' CPU kernels (issue 28): GroupNorm against a float64 replica
// with finite-difference gradients and its epsilon; nearest and bilinear
// resizing against PyTorch's known values and with a backward that is the
// forward's exact adjoint; a transposed convolution (conv2d_bwd without dW) as
// the adjoint of the convolution, its bias-free forward against a direct sum.
#include <cmath>
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
using test::weighted_sum;

std::vector<double> groupnorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                  const std::vector<double>& b, int64_t n, int64_t c, int64_t hw, int64_t groups,
                                  double eps) {
  std::vector<double> y(x.size());
  const int64_t cg = c / groups, m = cg * hw;
  for (int64_t i = 0; i < n * groups; ++i) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < m; ++k) mean += x[i * m + k];
    mean /= m;
    for (int64_t k = 0; k < m; ++k) var += (x[i * m + k] - mean) * (x[i * m + k] - mean);
    var /= m;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t ch = (i % groups) * cg + k / hw;
      y[i * m + k] = (x[i * m + k] - mean) / std::sqrt(var + eps) * g[ch] + b[ch];
    }
  }
  return y;
}

TEST(GroupNorm, ForwardAndBackwardMatchFloat64AndFiniteDifferences) {
  struct Case {
    int64_t n, c, hw, groups;
    double eps;
  };
  for (const Case s : {Case{2, 6, 5, 3, 1e-5}, Case{1, 4, 7, 1, 1e-3}, Case{3, 8, 1, 8, 1e-5}}) {
    SCOPED_TRACE(testing::Message() << s.n << "x" << s.c << "x" << s.hw << " groups " << s.groups << " eps " << s.eps);
    const auto x = random_floats(s.n * s.c * s.hw, 61);
    const auto gamma = random_floats(s.c, 62, 0.5f, 1.5f), beta = random_floats(s.c, 63);
    const auto dy = random_floats(x.size(), 64);
    std::vector<float> y(x.size()), mean(s.n * s.groups), rstd(s.n * s.groups);
    groupnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), s.n, s.c, s.hw, s.groups,
                  s.eps);
    auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta);
    const auto want = groupnorm_ref(xd, gd, bd, s.n, s.c, s.hw, s.groups, s.eps);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 2e-5) << i;
    std::vector<float> dx(x.size()), dgamma(s.c, 0.0f), dbeta(s.c, 0.0f);
    groupnorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data(),
                  s.n, s.c, s.hw, s.groups, false);
    auto loss = [&] { return weighted_sum(groupnorm_ref(xd, gd, bd, s.n, s.c, s.hw, s.groups, s.eps), dy); };
    expect_grad_near(dx, numeric_grad(xd, loss), "dx");
    expect_grad_near(dgamma, numeric_grad(gd, loss), "dgamma");
    expect_grad_near(dbeta, numeric_grad(bd, loss), "dbeta");
    // accumulate adds the same gradient onto what is there
    std::vector<float> added(x.size(), 1.0f);
    groupnorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), added.data(), dgamma.data(),
                  dbeta.data(), s.n, s.c, s.hw, s.groups, true);
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(added[i], 1.0f + dx[i]) << i;
  }
}

// torch.nn.functional.interpolate of [[1, 2], [3, 4]] to 4x4.
TEST(Upsample, KnownValuesOfPyTorch) {
  const float x[] = {1, 2, 3, 4};
  float y[16];
  upsample_fwd(x, y, 1, 2, 2, 4, 4, false, false);
  EXPECT_EQ(std::vector<float>(y, y + 16), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  upsample_fwd(x, y, 1, 2, 2, 4, 4, true, false);  // align_corners=False
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{1, 1.25f, 1.75f, 2}));
  EXPECT_EQ(std::vector<float>(y + 12, y + 16), (std::vector<float>{3, 3.25f, 3.75f, 4}));
  upsample_fwd(x, y, 1, 2, 2, 4, 4, true, true);   // align_corners=True
  EXPECT_NEAR(y[1], 1.0f + 1.0f / 3, 1e-6);
  EXPECT_EQ(y[15], 4.0f);
  // nearest 5 -> 3: floor(o * 5/3) = 0, 1, 3
  const float row[] = {10, 11, 12, 13, 14};
  float out[3];
  upsample_fwd(row, out, 1, 1, 5, 1, 3, false, false);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{10, 11, 13}));
}

// <up(x), g> == <x, up_bwd(g)> for every mode, up and down.
TEST(Upsample, BackwardIsTheForwardsAdjoint) {
  struct Case {
    int64_t ih, iw, oh, ow;
  };
  for (const bool bilinear : {false, true})
    for (const bool align : {false, true}) {
      if (align && !bilinear) continue;
      for (const Case s : {Case{3, 4, 7, 9}, Case{6, 5, 4, 2}, Case{1, 6, 1, 13}}) {
        const int64_t planes = 2, xn = planes * s.ih * s.iw, yn = planes * s.oh * s.ow;
        const auto x = random_floats(xn, 71), g = random_floats(yn, 72);
        std::vector<float> y(yn), dx(xn, 9.0f);
        upsample_fwd(x.data(), y.data(), planes, s.ih, s.iw, s.oh, s.ow, bilinear, align);
        upsample_bwd(g.data(), dx.data(), planes, s.ih, s.iw, s.oh, s.ow, bilinear, align, false);
        double lhs = 0, rhs = 0;
        for (int64_t i = 0; i < yn; ++i) lhs += static_cast<double>(y[i]) * g[i];
        for (int64_t i = 0; i < xn; ++i) rhs += static_cast<double>(x[i]) * dx[i];
        EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs))) << bilinear << align << " " << s.ih << "x" << s.iw;
      }
    }
}

// A transposed convolution is conv2d_bwd's input gradient (dW null, x unread):
// the adjoint of the convolution, <conv(a), b> == <a, convT(b)>.
TEST(ConvTranspose, IsTheAdjointOfTheConvolution) {
  ConvGeom g;
  g.n = 2, g.c = 4, g.h = 7, g.w = 6, g.k = 6, g.r = 3, g.s = 2;
  g.stride_h = 2, g.stride_w = 1, g.pad_h = 1, g.pad_w = 0, g.groups = 2;
  const int64_t an = g.n * g.c * g.h * g.w, bn = g.n * g.k * g.oh() * g.ow();
  const auto a = random_floats(an, 81), b = random_floats(bn, 82), W = random_floats(g.weight_numel(), 83);
  std::vector<float> scratch(static_cast<size_t>(conv2d_scratch_floats(g))), ca(bn), tb(an, 7.0f);
  conv2d_fwd(g, a.data(), W.data(), nullptr, ca.data(), scratch.data());
  conv2d_bwd(g, nullptr, W.data(), b.data(), tb.data(), nullptr, nullptr, false, scratch.data());
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < bn; ++i) lhs += static_cast<double>(ca[i]) * b[i];
  for (int64_t i = 0; i < an; ++i) rhs += static_cast<double>(a[i]) * tb[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
}

}  // namespace
}  // namespace remat::cpu
