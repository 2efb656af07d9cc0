// Pooling: max (values, first-maximum indices, ties, NaN, padding, dilation),
// average (count_include_pad or not, adaptive), both with ceil_mode, and
// global average, against direct implementations;
// backwards against finite differences and, bit for bit, against PyTorch's CPU
// order (scatter in increasing output order from zero); accumulate semantics
// and geometry errors.
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::expect_grad_near;
using test::garbage;
using test::numeric_grad;
using test::random_floats;
using test::to_double;
using test::weighted_sum;

struct Case {
  const char* name;
  PoolGeom g;
};

// Failures name the geometry instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

PoolGeom pool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
              int64_t ph, int64_t pw) {
  PoolGeom g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.kh = kh, g.kw = kw;
  g.stride_h = sh, g.stride_w = sw, g.pad_h = ph, g.pad_w = pw;
  return g;
}

const Case kCases[] = {
    {"k2s2", pool(2, 3, 6, 8, 2, 2, 2, 2, 0, 0)},
    {"resnet_k3s2p1", pool(2, 2, 9, 7, 3, 3, 2, 2, 1, 1)},  // overlapping windows, padding
    {"k3s1p1", pool(1, 2, 5, 5, 3, 3, 1, 1, 1, 1)},         // every input in up to 9 windows
    {"anisotropic", pool(2, 1, 7, 6, 3, 2, 1, 2, 1, 0)},
    {"whole_plane", pool(2, 3, 4, 5, 4, 5, 1, 1, 0, 0)},
};

// Geometries only max pooling takes (dilation) and only average pooling takes
// (the padding left out of the divisor, adaptive windows), with ceil_mode.
PoolGeom with(PoolGeom g, bool ceil, int64_t dil = 1, bool count_pad = true) {
  g.ceil_mode = ceil, g.dil_h = g.dil_w = dil, g.count_include_pad = count_pad;
  return g;
}
PoolGeom adaptive(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  PoolGeom g = pool(n, c, h, w, 1, 1, 1, 1, 0, 0);
  g.out_h = oh, g.out_w = ow;
  return g;
}

const Case kMaxCases[] = {
    {"ceil_k3s2", with(pool(2, 2, 8, 9, 3, 3, 2, 2, 0, 0), true)},  // squeezenet: last window past the edge
    {"ceil_k3s2p1", with(pool(1, 2, 10, 7, 3, 3, 2, 2, 1, 1), true)},
    {"ceil_k2s2_odd", with(pool(2, 1, 7, 5, 2, 2, 2, 2, 0, 0), true)},  // googlenet's 2x2 pools
    {"dilated", with(pool(2, 2, 9, 8, 3, 2, 1, 2, 1, 1), false, 2)},
    {"dilated_ceil", with(pool(1, 2, 11, 10, 3, 3, 2, 3, 1, 0), true, 2)},
};

const Case kAvgCases[] = {
    {"ceil_k3s2_pad_counted", with(pool(2, 2, 8, 9, 3, 3, 2, 2, 1, 1), true)},  // last windows clipped to h + pad
    {"ceil_k2s2", with(pool(2, 1, 7, 5, 2, 2, 2, 2, 0, 0), true)},
    {"pad_left_out", with(pool(2, 2, 7, 6, 3, 3, 1, 2, 1, 1), false, 1, false)},
    {"ceil_pad_left_out", with(pool(1, 3, 8, 9, 3, 3, 2, 2, 1, 1), true, 1, false)},
    {"adaptive_2_to_7", adaptive(2, 3, 2, 2, 7, 7)},  // vgg at 64x64: windows of 1 and 2
    {"adaptive_4x5_to_6x3", adaptive(2, 2, 4, 5, 6, 3)},  // overlapping windows, uneven
    {"adaptive_13_to_6", adaptive(1, 2, 13, 13, 6, 6)},   // alexnet at 224
    {"adaptive_identity", adaptive(1, 2, 3, 4, 3, 4)},
};

int64_t y_size(const PoolGeom& g) { return g.n * g.c * g.oh() * g.ow(); }

// Direct windows over the padded plane; padding positions are skipped (max)
// or count as zeros (average, divisor kh·kw).
struct MaxRef {
  std::vector<double> y;
  std::vector<int64_t> idx;
};
MaxRef maxpool_ref(const PoolGeom& g, const std::vector<double>& x) {
  MaxRef out{std::vector<double>(y_size(g)), std::vector<int64_t>(y_size(g))};
  int64_t o = 0;
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox, ++o) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t a = 0; a < g.kh; ++a)
          for (int64_t b = 0; b < g.kw; ++b) {
            const int64_t ih = oy * g.stride_h - g.pad_h + a * g.dil_h, iw = ox * g.stride_w - g.pad_w + b * g.dil_w;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            const double v = x[p * g.h * g.w + ih * g.w + iw];
            if (at < 0 || v > best) best = v, at = ih * g.w + iw;
          }
        out.y[o] = best;
        out.idx[o] = at;
      }
  return out;
}

// An average window, directly: the input positions it covers along one axis
// and the length its divisor counts (the positions inside the padded input,
// or inside the input; adaptive: [floor(o·in/out), ceil((o+1)·in/out))).
struct RefSpan {
  int64_t lo, hi, count;
};
RefSpan ref_span(int64_t o, int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t out, bool adaptive,
                 bool count_pad) {
  if (adaptive) {
    const auto lo = static_cast<int64_t>(std::floor(static_cast<double>(o) * in / out));
    const auto hi = static_cast<int64_t>(std::ceil(static_cast<double>(o + 1) * in / out));
    return {lo, hi, hi - lo};
  }
  RefSpan s{in, 0, 0};
  for (int64_t a = 0; a < k; ++a) {
    const int64_t i = o * stride - pad + a;
    if (i >= 0 && i < in) s.lo = std::min(s.lo, i), s.hi = std::max(s.hi, i + 1);
    if (count_pad ? i < in + pad : i >= 0 && i < in) ++s.count;
  }
  return s;
}
RefSpan ref_h(const PoolGeom& g, int64_t oy) {
  return ref_span(oy, g.h, g.kh, g.stride_h, g.pad_h, g.oh(), g.adaptive(), g.count_include_pad);
}
RefSpan ref_w(const PoolGeom& g, int64_t ox) {
  return ref_span(ox, g.w, g.kw, g.stride_w, g.pad_w, g.ow(), g.adaptive(), g.count_include_pad);
}

std::vector<double> avgpool_ref(const PoolGeom& g, const std::vector<double>& x) {
  std::vector<double> y(y_size(g));
  int64_t o = 0;
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox, ++o) {
        const RefSpan ys = ref_h(g, oy), xs = ref_w(g, ox);
        double sum = 0.0;
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih)
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) sum += x[p * g.h * g.w + ih * g.w + iw];
        y[o] = sum / static_cast<double>(ys.count * xs.count);
      }
  return y;
}

// PyTorch's CPU backward: a zeroed float dx, each output in increasing order
// adding its share to the input(s) it came from.
std::vector<float> maxpool_bwd_scatter(const PoolGeom& g, const std::vector<float>& dy,
                                       const std::vector<int64_t>& idx) {
  std::vector<float> dx(g.n * g.c * g.h * g.w, 0.0f);
  const int64_t ohw = g.oh() * g.ow();
  for (int64_t o = 0; o < y_size(g); ++o) dx[(o / ohw) * g.h * g.w + idx[o]] += dy[o];
  return dx;
}

// The share as PyTorch divides it: adaptive_avg_pool2d's dy / kh / kw,
// avg_pool2d's dy / (its divisor).
std::vector<float> avgpool_bwd_scatter(const PoolGeom& g, const std::vector<float>& dy) {
  std::vector<float> dx(g.n * g.c * g.h * g.w, 0.0f);
  int64_t o = 0;
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox, ++o) {
        const RefSpan ys = ref_h(g, oy), xs = ref_w(g, ox);
        const float share = g.adaptive() ? dy[o] / static_cast<float>(ys.count) / static_cast<float>(xs.count)
                                         : dy[o] / static_cast<float>(ys.count * xs.count);
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih)
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) dx[p * g.h * g.w + ih * g.w + iw] += share;
      }
  return dx;
}

// The checks, one geometry each (the suites below run them over theirs).
void check_max_forward(const PoolGeom& g) {
  const auto x = random_floats(g.n * g.c * g.h * g.w, 80);
  std::vector<float> y(y_size(g));
  std::vector<int64_t> idx(y.size());
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  const MaxRef ref = maxpool_ref(g, to_double(x));
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], static_cast<float>(ref.y[i])) << i;
    EXPECT_EQ(idx[i], ref.idx[i]) << i;
  }
}

void check_max_ties(const PoolGeom& g) {
  std::vector<float> x(g.n * g.c * g.h * g.w);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 3);  // values 0, 1, 2 only
  std::vector<float> y(y_size(g));
  std::vector<int64_t> idx(y.size());
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  EXPECT_EQ(idx, maxpool_ref(g, to_double(x)).idx);
}

void check_max_backward(const PoolGeom& g) {
  const auto x = random_floats(g.n * g.c * g.h * g.w, 81);
  const auto dy = random_floats(y_size(g), 82);
  std::vector<float> y(dy.size());
  std::vector<int64_t> idx(dy.size());
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  std::vector<float> dx(x.size());
  maxpool2d_bwd(g, dy.data(), idx.data(), dx.data(), false);
  const auto expected = maxpool_bwd_scatter(g, dy, idx);
  EXPECT_EQ(std::memcmp(dx.data(), expected.data(), dx.size() * sizeof(float)), 0);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return weighted_sum(maxpool_ref(g, xd).y, dy); }), "dx");
}

void check_avg_forward(const PoolGeom& g) {
  const auto x = random_floats(g.n * g.c * g.h * g.w, 83);
  std::vector<float> y(y_size(g));
  avgpool2d_fwd(g, x.data(), y.data());
  const auto ref = avgpool_ref(g, to_double(x));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-6 * (1.0 + std::abs(ref[i]))) << i;
}

void check_avg_backward(const PoolGeom& g) {
  const auto x = random_floats(g.n * g.c * g.h * g.w, 84);
  const auto dy = random_floats(y_size(g), 85);
  std::vector<float> dx(x.size());
  avgpool2d_bwd(g, dy.data(), dx.data(), false);
  const auto expected = avgpool_bwd_scatter(g, dy);
  EXPECT_EQ(std::memcmp(dx.data(), expected.data(), dx.size() * sizeof(float)), 0);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return weighted_sum(avgpool_ref(g, xd), dy); }), "dx");
}

class PoolTest : public testing::TestWithParam<Case> {};

TEST_P(PoolTest, MaxForwardMatchesDirectWindows) { check_max_forward(GetParam().g); }

TEST_P(PoolTest, MaxTiesGoToTheFirstMaximum) { check_max_ties(GetParam().g); }

TEST_P(PoolTest, MaxBackwardIsPyTorchsScatterAndFiniteDifferences) { check_max_backward(GetParam().g); }

TEST_P(PoolTest, AvgForwardMatchesDirectWindows) { check_avg_forward(GetParam().g); }

TEST_P(PoolTest, AvgBackwardIsPyTorchsScatterAndFiniteDifferences) { check_avg_backward(GetParam().g); }

TEST_P(PoolTest, OverwriteNeverReadsDxAccumulateAddsExactly) {
  const PoolGeom& g = GetParam().g;
  const auto x = random_floats(g.n * g.c * g.h * g.w, 86);
  const auto dy = random_floats(y_size(g), 87);
  std::vector<float> y(dy.size());
  std::vector<int64_t> idx(dy.size());
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  const auto fresh_max = maxpool_bwd_scatter(g, dy, idx);
  const auto fresh_avg = avgpool_bwd_scatter(g, dy);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  std::vector<float> over(x.size(), nan);
  maxpool2d_bwd(g, dy.data(), idx.data(), over.data(), false);
  EXPECT_EQ(std::memcmp(over.data(), fresh_max.data(), over.size() * sizeof(float)), 0);
  std::fill(over.begin(), over.end(), nan);
  avgpool2d_bwd(g, dy.data(), over.data(), false);
  EXPECT_EQ(std::memcmp(over.data(), fresh_avg.data(), over.size() * sizeof(float)), 0);

  const auto start = garbage(x.size());
  auto added = start;
  maxpool2d_bwd(g, dy.data(), idx.data(), added.data(), true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh_max[i]) << i;
  added = start;
  avgpool2d_bwd(g, dy.data(), added.data(), true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh_avg[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Geometries, PoolTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// ceil_mode and dilation: max pooling only.
class MaxPoolTest : public testing::TestWithParam<Case> {};
TEST_P(MaxPoolTest, ForwardMatchesDirectWindows) { check_max_forward(GetParam().g); }
TEST_P(MaxPoolTest, TiesGoToTheFirstMaximum) { check_max_ties(GetParam().g); }
TEST_P(MaxPoolTest, BackwardIsPyTorchsScatterAndFiniteDifferences) {
  check_max_backward(GetParam().g);
}
INSTANTIATE_TEST_SUITE_P(Geometries, MaxPoolTest, testing::ValuesIn(kMaxCases),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// ceil_mode, the padding left out of the divisor and adaptive windows: average pooling only.
class AvgPoolTest : public testing::TestWithParam<Case> {};
TEST_P(AvgPoolTest, ForwardMatchesDirectWindows) { check_avg_forward(GetParam().g); }
TEST_P(AvgPoolTest, BackwardIsPyTorchsScatterAndFiniteDifferences) {
  check_avg_backward(GetParam().g);
}
INSTANTIATE_TEST_SUITE_P(Geometries, AvgPoolTest, testing::ValuesIn(kAvgCases),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(MaxPool, PaddingNeverWinsAndNaNPropagates) {
  // All values negative, so a padding zero would win if it took part.
  const PoolGeom g = pool(1, 1, 3, 3, 3, 3, 2, 2, 1, 1);  // 2×2 output
  std::vector<float> x = {-9, -8, -7, -6, -5, -4, -3, -2, -1};
  std::vector<float> y(4);
  std::vector<int64_t> idx(4);
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  // Window (0,0) covers x rows 0-1, cols 0-1: max −5 at index 4; (0,1): rows 0-1, cols 1-2: −4 at 5; ...
  EXPECT_EQ(y, (std::vector<float>{-5, -4, -2, -1}));
  EXPECT_EQ(idx, (std::vector<int64_t>{4, 5, 7, 8}));

  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[2] = std::numeric_limits<float>::infinity();
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(y[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(idx[1], 2);
}

TEST(MaxPool, BackwardRejectsAnIndexOutsideThePlane) {
  const PoolGeom g = pool(1, 1, 2, 2, 2, 2, 2, 2, 0, 0);  // one output
  const float dy[] = {1.0f};
  float dx[4];
  for (const int64_t bad : {int64_t{4}, int64_t{-1}}) {
    const int64_t idx[] = {bad};
    EXPECT_THROW(maxpool2d_bwd(g, dy, idx, dx, false), std::invalid_argument) << bad;
  }
}

TEST(AvgPool, PaddingCountsInTheDivisor) {
  const PoolGeom g = pool(1, 1, 2, 2, 2, 2, 1, 1, 1, 1);  // 3×3 output
  const float x[] = {1, 2, 3, 4};
  float y[9];
  avgpool2d_fwd(g, x, y);
  // The corner window holds one real element and three zeros of padding.
  EXPECT_FLOAT_EQ(y[0], 1.0f / 4);
  EXPECT_FLOAT_EQ(y[1], 3.0f / 4);
  EXPECT_FLOAT_EQ(y[4], 10.0f / 4);
  EXPECT_FLOAT_EQ(y[8], 4.0f / 4);
}

TEST(AvgPool, CeilModesLastWindowDividesByItsPartOfThePaddedInput) {
  // 4x4, kernel 3, stride 2, pad 1, ceil_mode: 3x3 outputs; along an axis the
  // windows are [-1, 2), [1, 4) and [3, 6) clipped to [3, 5) by the padded
  // edge: 3, 3 and 2 positions counted with the padding, 2, 3 and 1 without.
  PoolGeom g = with(pool(1, 1, 4, 4, 3, 3, 2, 2, 1, 1), true);
  ASSERT_EQ(g.oh(), 3);
  ASSERT_EQ(g.ow(), 3);
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  float y[9];
  avgpool2d_fwd(g, x, y);
  EXPECT_EQ(y[0], (1.0f + 2 + 5 + 6) / 9);
  EXPECT_EQ(y[8], 16.0f / 4);
  EXPECT_EQ(y[2], (4.0f + 8) / 6);  // rows 0-1 of 3 counted, column 3 of 2
  g.count_include_pad = false;
  avgpool2d_fwd(g, x, y);
  EXPECT_EQ(y[0], (1.0f + 2 + 5 + 6) / 4);
  EXPECT_EQ(y[8], 16.0f);
  EXPECT_EQ(y[2], (4.0f + 8) / 2);
}

TEST(AvgPool, AdaptiveWindowsAreFloorAndCeilOfTheScaledIndex) {
  // 5 -> 3: [0, 2), [1, 4), [3, 5); 1 -> 2: [0, 1) twice.
  const PoolGeom g = adaptive(1, 1, 1, 5, 2, 3);
  const float x[] = {1, 2, 4, 8, 16};
  float y[6];
  avgpool2d_fwd(g, x, y);
  EXPECT_EQ(y[0], 3.0f / 1 / 2);
  EXPECT_EQ(y[1], 14.0f / 1 / 3);
  EXPECT_EQ(y[2], 24.0f / 1 / 2);
  EXPECT_EQ(y[3], y[0]);
  // Backward: x[1] is in windows 0 and 1 of both rows, in output order.
  const float dy[] = {1, 3, 5, 7, 9, 11};
  float dx[5];
  avgpool2d_bwd(g, dy, dx, false);
  EXPECT_EQ(dx[1], ((0.0f + 1.0f / 2) + 3.0f / 3) + 7.0f / 2 + 9.0f / 3);
  EXPECT_EQ(dx[2], 3.0f / 3 + 9.0f / 3);
}

TEST(MaxPool, DilatedWindowsSkipPositions) {
  // 1x5, kernel 2, dilation 3: windows {0, 3} and {1, 4}.
  PoolGeom g = pool(1, 1, 1, 5, 1, 2, 1, 1, 0, 0);
  g.dil_w = 3;
  ASSERT_EQ(g.ow(), 2);
  const float x[] = {1, 9, 8, 2, 3};
  float y[2];
  int64_t idx[2];
  maxpool2d_fwd(g, x, y, idx);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(idx[0], 3);
  EXPECT_EQ(y[1], 9.0f);
  EXPECT_EQ(idx[1], 1);
}

TEST(GlobalAvgPool, MeanPerPlaneAndEvenGradient) {
  const int64_t nc = 3, hw = 49;
  const auto x = random_floats(nc * hw, 88);
  std::vector<float> y(nc);
  global_avgpool_fwd(x.data(), y.data(), nc, hw);
  for (int64_t p = 0; p < nc; ++p) {
    double sum = 0.0;
    for (int64_t i = 0; i < hw; ++i) sum += x[p * hw + i];
    EXPECT_NEAR(y[p], sum / hw, 1e-6) << p;
  }
  const float dy[] = {49.0f, -4.9f, 0.5f};
  std::vector<float> dx(nc * hw, std::numeric_limits<float>::quiet_NaN());
  global_avgpool_bwd(dy, dx.data(), nc, hw, false);
  for (int64_t i = 0; i < nc * hw; ++i) EXPECT_EQ(dx[i], dy[i / hw] / 49.0f) << i;
  const auto start = garbage(nc * hw);
  auto added = start;
  global_avgpool_bwd(dy, added.data(), nc, hw, true);
  for (int64_t i = 0; i < nc * hw; ++i) EXPECT_EQ(added[i], start[i] + dy[i / hw] / 49.0f) << i;
}

TEST(Pool, CheckRejectsBadGeometryNamingTheField) {
  const auto expect_bad = [](const PoolGeom& g, const std::string& needle) {
    try {
      check_pool(g);
      ADD_FAILURE() << "accepted a geometry with bad " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const PoolGeom good = pool(2, 3, 6, 6, 3, 3, 2, 2, 1, 1);
  EXPECT_NO_THROW(check_pool(good));
  struct Field {
    const char* name;
    int64_t PoolGeom::*member;
    int64_t bad;
  };
  const Field fields[] = {{"n", &PoolGeom::n, 0},         {"c", &PoolGeom::c, 0},
                          {"h", &PoolGeom::h, -1},        {"w", &PoolGeom::w, 0},
                          {"kh", &PoolGeom::kh, 0},       {"kw", &PoolGeom::kw, 0},
                          {"stride_h", &PoolGeom::stride_h, 0}, {"stride_w", &PoolGeom::stride_w, 0}};
  for (const Field& f : fields) {
    PoolGeom g = good;
    g.*f.member = f.bad;
    expect_bad(g, std::string(f.name) + " must be positive");
  }
  PoolGeom g = good;
  g.pad_h = 2;  // more than half of kh = 3: a window could be all padding
  expect_bad(g, "pad_h = 2");
  g = good;
  g.pad_w = -1;
  expect_bad(g, "pad_w = -1");
  g = good;
  g.h = 1;
  g.pad_h = 0;
  expect_bad(g, "h + 2*pad_h = 1");
  g = good;
  g.kw = 9;
  g.pad_w = 1;
  expect_bad(g, "w + 2*pad_w = 8");
  g = good;
  g.kh = 0;
  EXPECT_THROW(maxpool2d_fwd(g, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(avgpool2d_bwd(g, nullptr, nullptr, false), std::invalid_argument);
  g = good;
  g.dil_w = 0;
  expect_bad(g, "dil_w must be positive");
  g = good;
  g.dil_h = 4;  // a 3-window dilated by 4 spans 9 > 6 + 2
  expect_bad(g, "smaller than the window, 9");
  g = good;
  g.out_w = 2;
  expect_bad(g, "without out_h");
  // Each kind refuses the other's geometry.
  g = good;
  g.dil_h = 2;
  EXPECT_THROW(avgpool2d_fwd(g, nullptr, nullptr), std::invalid_argument);
  g = adaptive(1, 1, 4, 4, 2, 2);
  EXPECT_THROW(maxpool2d_fwd(g, nullptr, nullptr, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace remat::cpu
