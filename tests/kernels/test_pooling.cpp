// Pooling: max (values, first-maximum indices, ties, NaN, padding), average
// (count_include_pad) and global average, against direct implementations;
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
            const int64_t ih = oy * g.stride_h - g.pad_h + a, iw = ox * g.stride_w - g.pad_w + b;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            const double v = x[p * g.h * g.w + ih * g.w + iw];
            if (at < 0 || v > best) best = v, at = ih * g.w + iw;
          }
        out.y[o] = best;
        out.idx[o] = at;
      }
  return out;
}

std::vector<double> avgpool_ref(const PoolGeom& g, const std::vector<double>& x) {
  std::vector<double> y(y_size(g));
  int64_t o = 0;
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox, ++o) {
        double sum = 0.0;
        for (int64_t a = 0; a < g.kh; ++a)
          for (int64_t b = 0; b < g.kw; ++b) {
            const int64_t ih = oy * g.stride_h - g.pad_h + a, iw = ox * g.stride_w - g.pad_w + b;
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) sum += x[p * g.h * g.w + ih * g.w + iw];
          }
        y[o] = sum / static_cast<double>(g.kh * g.kw);
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

std::vector<float> avgpool_bwd_scatter(const PoolGeom& g, const std::vector<float>& dy) {
  std::vector<float> dx(g.n * g.c * g.h * g.w, 0.0f);
  int64_t o = 0;
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox, ++o) {
        const float share = dy[o] / static_cast<float>(g.kh * g.kw);
        for (int64_t a = 0; a < g.kh; ++a)
          for (int64_t b = 0; b < g.kw; ++b) {
            const int64_t ih = oy * g.stride_h - g.pad_h + a, iw = ox * g.stride_w - g.pad_w + b;
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) dx[p * g.h * g.w + ih * g.w + iw] += share;
          }
      }
  return dx;
}

class PoolTest : public testing::TestWithParam<Case> {};

TEST_P(PoolTest, MaxForwardMatchesDirectWindows) {
  const PoolGeom& g = GetParam().g;
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

TEST_P(PoolTest, MaxTiesGoToTheFirstMaximum) {
  const PoolGeom& g = GetParam().g;
  std::vector<float> x(g.n * g.c * g.h * g.w);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 3);  // values 0, 1, 2 only
  std::vector<float> y(y_size(g));
  std::vector<int64_t> idx(y.size());
  maxpool2d_fwd(g, x.data(), y.data(), idx.data());
  EXPECT_EQ(idx, maxpool_ref(g, to_double(x)).idx);
}

TEST_P(PoolTest, MaxBackwardIsPyTorchsScatterAndFiniteDifferences) {
  const PoolGeom& g = GetParam().g;
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

TEST_P(PoolTest, AvgForwardMatchesDirectWindows) {
  const PoolGeom& g = GetParam().g;
  const auto x = random_floats(g.n * g.c * g.h * g.w, 83);
  std::vector<float> y(y_size(g));
  avgpool2d_fwd(g, x.data(), y.data());
  const auto ref = avgpool_ref(g, to_double(x));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-6 * (1.0 + std::abs(ref[i]))) << i;
}

TEST_P(PoolTest, AvgBackwardIsPyTorchsScatterAndFiniteDifferences) {
  const PoolGeom& g = GetParam().g;
  const auto x = random_floats(g.n * g.c * g.h * g.w, 84);
  const auto dy = random_floats(y_size(g), 85);
  std::vector<float> dx(x.size());
  avgpool2d_bwd(g, dy.data(), dx.data(), false);
  const auto expected = avgpool_bwd_scatter(g, dy);
  EXPECT_EQ(std::memcmp(dx.data(), expected.data(), dx.size() * sizeof(float)), 0);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return weighted_sum(avgpool_ref(g, xd), dy); }), "dx");
}

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
}

}  // namespace
}  // namespace remat::cpu
