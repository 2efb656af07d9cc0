// The tail kinds' CPU kernels (issue 28): GroupNorm against a float64 replica
// with finite-difference gradients and its epsilon; nearest and bilinear
// resizing against PyTorch's known values and with a backward that is the
// forward's exact adjoint; a transposed convolution (conv2d_bwd without dW) as
// the adjoint of the convolution, its bias-free forward against a direct sum;
// the three norms without affine parameters (null gamma, beta) equal to
// gamma 1, beta 0 bit for bit, leaving no parameter gradient;
// top-k's indices against a sort (ties, NaN, a strided input) and gather
// through an expanded (stride 0) index with its backward as the adjoint.
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

// A norm without affine parameters (elementwise_affine=False, affine=False)
// runs as gamma 1 and beta 0 would, to the bit, forward and backward (dx
// overwritten and accumulated).
TEST(Norms, WithoutAffineParametersEqualGammaOneBetaZero) {
  const int64_t n = 2, c = 6, hw = 5, groups = 3, m = n * c * hw;
  const std::vector<float> x = random_floats(m, 81), dy = random_floats(m, 82);
  const std::vector<float> ones(c, 1.0f), zeros(c, 0.0f);
  const auto same = [](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << "[" << i << "]";
  };
  for (const bool accumulate : {false, true}) {
    {  // GroupNorm over (n, c, hw)
      std::vector<float> y0(m), y1(m), s0(2 * n * groups), s1(2 * n * groups);
      groupnorm_fwd(x.data(), ones.data(), zeros.data(), y0.data(), s0.data(), s0.data() + n * groups, n, c, hw, groups, 1e-4);
      groupnorm_fwd(x.data(), nullptr, nullptr, y1.data(), s1.data(), s1.data() + n * groups, n, c, hw, groups, 1e-4);
      same(y0, y1, "groupnorm y");
      std::vector<float> dx0(m, 0.5f), dx1(m, 0.5f), dg(c, 0.0f), db(c, 0.0f);
      groupnorm_bwd(x.data(), dy.data(), ones.data(), s0.data(), s0.data() + n * groups, dx0.data(), dg.data(), db.data(),
                    n, c, hw, groups, accumulate);
      groupnorm_bwd(x.data(), dy.data(), nullptr, s1.data(), s1.data() + n * groups, dx1.data(), nullptr, nullptr, n, c,
                    hw, groups, accumulate);
      same(dx0, dx1, "groupnorm dx");
    }
    {  // BatchNorm over (n, c, hw)
      std::vector<float> y0(m), y1(m), s0(2 * c), s1(2 * c);
      batchnorm_fwd(x.data(), ones.data(), zeros.data(), y0.data(), s0.data(), s0.data() + c, nullptr, nullptr, n, c, hw,
                    1e-3f, 0.1f);
      batchnorm_fwd(x.data(), nullptr, nullptr, y1.data(), s1.data(), s1.data() + c, nullptr, nullptr, n, c, hw, 1e-3f,
                    0.1f);
      same(y0, y1, "batchnorm y");
      std::vector<float> dx0(m, 0.5f), dx1(m, 0.5f), dg(c, 0.0f), db(c, 0.0f);
      batchnorm_bwd(x.data(), dy.data(), ones.data(), s0.data(), s0.data() + c, dx0.data(), dg.data(), db.data(), n, c,
                    hw, accumulate);
      batchnorm_bwd(x.data(), dy.data(), nullptr, s1.data(), s1.data() + c, dx1.data(), nullptr, nullptr, n, c, hw,
                    accumulate);
      same(dx0, dx1, "batchnorm dx");
    }
    {  // LayerNorm over rows of c·hw
      const int64_t rows = n, cols = c * hw;
      const std::vector<float> lones(cols, 1.0f), lzeros(cols, 0.0f);
      std::vector<float> y0(m), y1(m), s0(2 * rows), s1(2 * rows);
      layernorm_fwd(x.data(), lones.data(), lzeros.data(), y0.data(), s0.data(), rows, cols, 1e-6);
      layernorm_fwd(x.data(), nullptr, nullptr, y1.data(), s1.data(), rows, cols, 1e-6);
      same(y0, y1, "layernorm y");
      std::vector<float> dx0(m, 0.5f), dx1(m, 0.5f), dg(cols, 0.0f), db(cols, 0.0f);
      layernorm_bwd(x.data(), s0.data(), lones.data(), dy.data(), dx0.data(), dg.data(), db.data(), rows, cols, accumulate);
      layernorm_bwd(x.data(), s1.data(), nullptr, dy.data(), dx1.data(), nullptr, nullptr, rows, cols, accumulate);
      same(dx0, dx1, "layernorm dx");
    }
  }
}

// (3, 5) read transposed from a (5, 3) buffer, k = 3 along axis 1: each row's
// positions by value, largest first, a tie to the lower position, NaN first.
TEST(TopK, PicksTheLargestInPyTorchsOrderThroughStrides) {
  const float nan = std::nanf("");
  // Row-major (3, 5) values; stored transposed.
  const std::vector<float> rows = {0.5f, 2.0f, -1.0f, 2.0f, 0.1f,   // a tie: 1 before 3
                                   -3.0f, -2.0f, -1.0f, -4.0f, -5.0f,
                                   1.0f, nan, 3.0f, 0.0f, 2.5f};    // NaN ranks first
  std::vector<float> stored(15);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) stored[static_cast<size_t>(c * 3 + r)] = rows[static_cast<size_t>(r * 5 + c)];
  TopKGeom g;
  g.rank = 2;
  g.axis = 1;
  g.k = 3;
  g.shape[0] = 3, g.shape[1] = 5;
  g.stride[0] = 1, g.stride[1] = 3;
  std::vector<int64_t> index(9, -1);
  topk_fwd(g, stored.data(), index.data());
  EXPECT_EQ(index, (std::vector<int64_t>{1, 3, 0, 2, 1, 0, 1, 2, 4}));
  // Along axis 0 of the same view (k = 2 of 3 per column), written (2, 5).
  g.axis = 0;
  g.k = 2;
  std::vector<int64_t> cols(10, -1);
  topk_fwd(g, stored.data(), cols.data());
  EXPECT_EQ(cols, (std::vector<int64_t>{2, 2, 2, 0, 2, 0, 0, 0, 2, 0}));
}

// y (4, 2, 3) = x (4, 5, 3) gathered along axis 1 by an index (4, 2) expanded
// over the last axis (stride 0), as a MoE picks its experts' outputs; the
// backward is the forward's adjoint: <gather(x), dy> = <x, gather_bwd(dy)>,
// each x element receiving the sum of the dy its picks got (an index picking
// one expert twice sums both).
TEST(Gather, PicksThroughAnExpandedIndexAndItsBackwardIsTheAdjoint) {
  const std::vector<float> x = random_floats(4 * 5 * 3, 71);
  const std::vector<int64_t> picks = {4, 0, 1, 1, 3, 2, 0, 4};  // row 1 picks expert 1 twice
  GatherGeom g;
  g.rank = 3;
  g.axis = 1;
  const int64_t shape[3] = {4, 2, 3}, xs[3] = {4, 5, 3};
  for (int d = 0; d < 3; ++d) g.shape[d] = shape[d], g.x_shape[d] = xs[d];
  g.i_stride[0] = 2, g.i_stride[1] = 1, g.i_stride[2] = 0;
  g.x_stride[0] = 15, g.x_stride[1] = 3, g.x_stride[2] = 1;
  std::vector<float> y(24);
  gather_fwd(g, x.data(), picks.data(), y.data());
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(y[static_cast<size_t>((n * 2 + j) * 3 + c)], x[static_cast<size_t>(n * 15 + picks[static_cast<size_t>(n * 2 + j)] * 3 + c)]);
  const std::vector<float> dy = random_floats(24, 72);
  std::vector<float> dx(60, 7.0f);
  gather_bwd(g, picks.data(), dy.data(), dx.data(), false);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < y.size(); ++i) lhs += static_cast<double>(y[i]) * dy[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += static_cast<double>(x[i]) * dx[i];
  EXPECT_NEAR(lhs, rhs, 1e-5 * (1 + std::abs(lhs)));
  // Row 1 picked expert 1 twice: its gradient is the sum, in pick order.
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_EQ(dx[static_cast<size_t>(15 + 3 + c)],
              static_cast<float>(static_cast<double>(dy[static_cast<size_t>(6 + c)]) + dy[static_cast<size_t>(9 + c)]));
  EXPECT_EQ(dx[static_cast<size_t>(15 + 0)], 0.0f);  // expert 0 of row 1: not picked
  // accumulate adds each element's sum to what was there.
  std::vector<float> acc(60, 0.25f);
  gather_bwd(g, picks.data(), dy.data(), acc.data(), true);
  for (size_t i = 0; i < acc.size(); ++i) EXPECT_EQ(acc[i], 0.25f + dx[i]) << i;
}

}  // namespace
}  // namespace remat::cpu
