// Convolution: the forward against a direct seven-loop convolution in double
// over geometries that take every path (groups, depthwise, stride, padding,
// dilation, 1-D, non-square, pointwise), finite-difference backwards,
// accumulate semantics, the scratch bound, determinism and geometry errors.
// Agreement with PyTorch itself is kernels_vs_torch.py.
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
  ConvGeom g;
  bool bias = true;
};

ConvGeom geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s) {
  ConvGeom g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  return g;
}

// Failures name the geometry instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Scratch as a caller may hand it over: full of whatever was there before.
std::vector<float> dirty_scratch(const ConvGeom& g) {
  return std::vector<float>(conv2d_scratch_floats(g), std::numeric_limits<float>::quiet_NaN());
}

std::vector<Case> cases() {
  std::vector<Case> v;
  ConvGeom g = geom(2, 3, 5, 6, 4, 3, 3);
  g.pad_h = g.pad_w = 1;
  v.push_back({"same_3x3", g});
  g = geom(2, 3, 7, 5, 2, 3, 2);  // non-square input and kernel
  g.stride_h = g.stride_w = 2;
  g.pad_h = 1;
  v.push_back({"stride2_nonsquare", g});
  g = geom(1, 2, 7, 7, 3, 3, 3);
  g.dil_h = g.dil_w = 2;
  g.pad_h = g.pad_w = 2;
  v.push_back({"dilated", g});
  g = geom(2, 4, 5, 5, 6, 3, 3);
  g.groups = 2;
  g.pad_h = g.pad_w = 1;
  v.push_back({"groups2", g});
  g = geom(2, 4, 6, 6, 8, 3, 3);  // depthwise with channel multiplier 2
  g.groups = 4;
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  v.push_back({"depthwise", g});
  g = geom(2, 3, 1, 9, 4, 1, 3);  // 1-D: h = r = 1
  g.stride_w = 2;
  g.pad_w = 1;
  v.push_back({"conv1d", g});
  v.push_back({"pointwise", geom(2, 5, 4, 3, 3, 1, 1)});
  g = geom(2, 4, 6, 5, 3, 1, 1);  // ResNet's downsampling shortcut
  g.stride_h = g.stride_w = 2;
  v.push_back({"pointwise_stride2", g, false});
  g = geom(1, 2, 5, 8, 3, 2, 3);  // every parameter differs between the axes
  g.stride_w = 3;
  g.pad_w = 2;
  g.dil_w = 2;
  g.dil_h = 3;
  g.pad_h = 1;
  v.push_back({"anisotropic", g, false});
  g = geom(1, 1, 3, 3, 1, 3, 3);  // the kernel covers the input: a 1×1 output
  v.push_back({"full_window", g});
  // Runs of images per GEMM (conv2d_images_per_gemm): 256 columns an image
  // make runs of 2, so 3 images are a run of 2 and a run of 1; likewise with
  // groups and pointwise; 529 columns: one image per product. Small channel
  // counts: the finite differences run a whole convolution per element.
  g = geom(3, 1, 16, 16, 1, 3, 3);
  g.pad_h = g.pad_w = 1;
  v.push_back({"ragged_runs", g});
  g = geom(3, 2, 16, 16, 2, 3, 3);
  g.groups = 2;
  g.pad_h = g.pad_w = 1;
  v.push_back({"ragged_runs_groups2", g});
  v.push_back({"pointwise_ragged_runs", geom(3, 2, 16, 16, 2, 1, 1), false});
  g = geom(2, 1, 23, 23, 1, 3, 3);
  g.pad_h = g.pad_w = 1;
  v.push_back({"image_per_gemm", g});
  v.push_back({"pointwise_image_per_gemm", geom(1, 2, 23, 23, 2, 1, 1)});
  return v;
}

// y[n][k][oy][ox] = b[k] + Σ_{ci,kr,ks} x[n][grp·cg+ci][iy][ix] · W[k][ci][kr][ks]
std::vector<double> conv_ref(const ConvGeom& g, const std::vector<double>& x, const std::vector<double>& W,
                             const std::vector<double>* b) {
  const int64_t oh = g.oh(), ow = g.ow(), cg = g.c / g.groups, kg = g.k / g.groups;
  std::vector<double> y(g.n * g.k * oh * ow);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b ? (*b)[k] : 0.0;
          const int64_t grp = k / kg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t kr = 0; kr < g.r; ++kr)
              for (int64_t ks = 0; ks < g.s; ++ks) {
                const int64_t iy = oy * g.stride_h - g.pad_h + kr * g.dil_h;
                const int64_t ix = ox * g.stride_w - g.pad_w + ks * g.dil_w;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                acc += x[((n * g.c + grp * cg + ci) * g.h + iy) * g.w + ix] *
                       W[((k * cg + ci) * g.r + kr) * g.s + ks];
              }
          y[((n * g.k + k) * oh + oy) * ow + ox] = acc;
        }
  return y;
}

struct Data {
  std::vector<float> x, W, b, dy;
};

Data make_data(const ConvGeom& g, uint32_t seed) {
  const int64_t ysize = g.n * g.k * g.oh() * g.ow();
  return {random_floats(g.n * g.c * g.h * g.w, seed), random_floats(g.weight_numel(), seed + 1),
          random_floats(g.k, seed + 2), random_floats(ysize, seed + 3)};
}

std::vector<float> run_fwd(const ConvGeom& g, const Data& d, bool bias) {
  std::vector<float> y(g.n * g.k * g.oh() * g.ow());
  auto scratch = dirty_scratch(g);
  conv2d_fwd(g, d.x.data(), d.W.data(), bias ? d.b.data() : nullptr, y.data(), scratch.data());
  return y;
}

struct Grads {
  std::vector<float> dx, dW, db;
};

Grads run_bwd(const ConvGeom& g, const Data& d) {
  Grads out{std::vector<float>(d.x.size()), std::vector<float>(d.W.size(), 0.0f), std::vector<float>(g.k, 0.0f)};
  auto scratch = dirty_scratch(g);
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), out.dx.data(), out.dW.data(), out.db.data(), false,
             scratch.data());
  return out;
}

class ConvTest : public testing::TestWithParam<Case> {};

TEST_P(ConvTest, ForwardMatchesDirectConvolution) {
  const Case& cs = GetParam();
  const ConvGeom& g = cs.g;
  const Data d = make_data(g, 61);
  const auto y = run_fwd(g, d, cs.bias);
  const auto bd = to_double(d.b);
  const auto ref = conv_ref(g, to_double(d.x), to_double(d.W), cs.bias ? &bd : nullptr);
  ASSERT_EQ(y.size(), ref.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * (1.0 + std::abs(ref[i]))) << i;
}

TEST_P(ConvTest, BackwardMatchesFiniteDifferences) {
  const ConvGeom& g = GetParam().g;
  const Data d = make_data(g, 62);
  const Grads got = run_bwd(g, d);
  auto xd = to_double(d.x), Wd = to_double(d.W), bd = to_double(d.b);
  auto loss = [&] { return weighted_sum(conv_ref(g, xd, Wd, &bd), d.dy); };
  expect_grad_near(got.dx, numeric_grad(xd, loss), "dx");
  expect_grad_near(got.dW, numeric_grad(Wd, loss), "dW");
  expect_grad_near(got.db, numeric_grad(bd, loss), "db");
}

TEST_P(ConvTest, OverwriteNeverReadsDxAccumulateAddsExactly) {
  const ConvGeom& g = GetParam().g;
  const Data d = make_data(g, 63);
  const Grads fresh = run_bwd(g, d);
  auto scratch = dirty_scratch(g);

  // accumulate == false on a NaN-filled dx: a single read would leave a NaN.
  std::vector<float> over(d.x.size(), std::numeric_limits<float>::quiet_NaN());
  const auto dW_start = garbage(d.W.size()), db_start = garbage(g.k);
  auto dW = dW_start, db = db_start;
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), over.data(), dW.data(), db.data(), false, scratch.data());
  EXPECT_EQ(std::memcmp(over.data(), fresh.dx.data(), over.size() * sizeof(float)), 0);
  // Parameter gradients add whatever accumulate says.
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW[i], dW_start[i] + fresh.dW[i], 1e-5f) << i;
  for (int64_t i = 0; i < g.k; ++i) EXPECT_NEAR(db[i], db_start[i] + fresh.db[i], 1e-5f) << i;

  // accumulate == true: every element is the start plus the very same fresh value.
  const auto start = garbage(d.x.size());
  auto added = start;
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), added.data(), dW.data(), db.data(), true, scratch.data());
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh.dx[i]) << i;
}

TEST_P(ConvTest, NullDxAndDbSkipOnlyThemselves) {
  const ConvGeom& g = GetParam().g;
  const Data d = make_data(g, 64);
  const Grads full = run_bwd(g, d);
  std::vector<float> dW(d.W.size(), 0.0f);
  auto scratch = dirty_scratch(g);
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), nullptr, dW.data(), nullptr, false, scratch.data());
  EXPECT_EQ(dW, full.dW);
}

TEST_P(ConvTest, StaysInsideItsScratchAndRepeatsBitForBit) {
  const ConvGeom& g = GetParam().g;
  // The documented size: a run's columns, (c/groups·r·s, run·oh·ow), and with
  // more than one image a run, its output or dy rows, (k/groups, run·oh·ow).
  const int64_t run = conv2d_images_per_gemm(g), cols = run * g.oh() * g.ow();
  const int64_t expected = g.c / g.groups * g.r * g.s * cols + (run > 1 ? g.k / g.groups * cols : 0);
  ASSERT_EQ(conv2d_scratch_floats(g), expected);
  const Data d = make_data(g, 65);
  constexpr int64_t kGuard = 64;
  const float sentinel = -12345.5f;
  std::vector<float> scratch(expected + kGuard, sentinel);
  std::vector<float> y1(g.n * g.k * g.oh() * g.ow()), y2(y1.size());
  conv2d_fwd(g, d.x.data(), d.W.data(), d.b.data(), y1.data(), scratch.data());
  conv2d_fwd(g, d.x.data(), d.W.data(), d.b.data(), y2.data(), scratch.data());
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
  Grads a{std::vector<float>(d.x.size()), std::vector<float>(d.W.size(), 0.0f), std::vector<float>(g.k, 0.0f)};
  Grads b = a;
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), a.dx.data(), a.dW.data(), a.db.data(), false, scratch.data());
  conv2d_bwd(g, d.x.data(), d.W.data(), d.dy.data(), b.dx.data(), b.dW.data(), b.db.data(), false, scratch.data());
  EXPECT_EQ(std::memcmp(a.dx.data(), b.dx.data(), a.dx.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.dW.data(), b.dW.data(), a.dW.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.db.data(), b.db.data(), a.db.size() * sizeof(float)), 0);
  for (int64_t i = expected; i < expected + kGuard; ++i) EXPECT_EQ(scratch[i], sentinel) << "wrote past scratch";
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvTest, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Enough images for 512 columns a product, never more than the batch.
TEST(Conv, ImagesShareAGemmUpTo512Columns) {
  ConvGeom g = geom(8, 64, 7, 7, 64, 3, 3);
  g.pad_h = g.pad_w = 1;
  EXPECT_EQ(conv2d_images_per_gemm(g), 8);  // ⌈512 / 49⌉ = 11, 8 images
  g.n = 32;
  EXPECT_EQ(conv2d_images_per_gemm(g), 11);
  g.h = g.w = 16;  // 256 columns
  EXPECT_EQ(conv2d_images_per_gemm(g), 2);
  g.h = g.w = 23;  // 529
  EXPECT_EQ(conv2d_images_per_gemm(g), 1);
  EXPECT_EQ(conv2d_scratch_floats(g), 64 * 9 * 529);  // one image: no output rows
  g.h = g.w = 10;  // 100 columns, runs of 6
  EXPECT_EQ(conv2d_scratch_floats(g), (64 * 9 + 64) * 600);
}

TEST(Conv, OutputSizeFollowsPyTorchFormula) {
  ConvGeom g = geom(1, 1, 56, 57, 1, 3, 3);
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  EXPECT_EQ(g.oh(), 28);  // (56 + 2 − 2 − 1) / 2 + 1
  EXPECT_EQ(g.ow(), 29);  // (57 + 2 − 2 − 1) / 2 + 1
  g.dil_h = 2;
  EXPECT_EQ(g.oh(), 27);  // (56 + 2 − 4 − 1) / 2 + 1
}

// Each bad field is named in the message.
TEST(Conv, CheckRejectsBadGeometryNamingTheField) {
  const auto expect_bad = [](const ConvGeom& g, const std::string& needle) {
    try {
      check_conv(g);
      ADD_FAILURE() << "accepted a geometry with bad " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const ConvGeom good = geom(2, 4, 5, 5, 6, 3, 3);
  EXPECT_NO_THROW(check_conv(good));
  struct Field {
    const char* name;
    int64_t ConvGeom::*member;
    int64_t bad;
  };
  const Field fields[] = {{"n", &ConvGeom::n, 0},
                          {"c", &ConvGeom::c, -1},
                          {"h", &ConvGeom::h, 0},
                          {"w", &ConvGeom::w, 0},
                          {"k", &ConvGeom::k, 0},
                          {"r", &ConvGeom::r, 0},
                          {"s", &ConvGeom::s, 0},
                          {"stride_h", &ConvGeom::stride_h, 0},
                          {"stride_w", &ConvGeom::stride_w, -2},
                          {"dil_h", &ConvGeom::dil_h, 0},
                          {"dil_w", &ConvGeom::dil_w, 0},
                          {"groups", &ConvGeom::groups, 0},
                          {"pad_h", &ConvGeom::pad_h, -1},
                          {"pad_w", &ConvGeom::pad_w, -1}};
  for (const Field& f : fields) {
    ConvGeom g = good;
    g.*f.member = f.bad;
    expect_bad(g, std::string(f.name) + " must");
  }
  ConvGeom g = good;
  g.groups = 3;  // divides k = 6 but not c = 4
  expect_bad(g, "does not divide c = 4");
  g = good;
  g.k = 5;
  g.groups = 2;
  expect_bad(g, "does not divide k = 5");
  // h + 2·pad_h − dil_h·(r−1) − 1 = 5 − 6 − 1 < 0: the formula alone would say oh = 1.
  g = good;
  g.dil_h = 3;
  expect_bad(g, "h + 2*pad_h = 5");
  g = good;
  g.s = 6;
  expect_bad(g, "w + 2*pad_w = 5");
  // The kernels check before they touch memory.
  g = good;
  g.stride_w = 0;
  EXPECT_THROW(conv2d_fwd(g, nullptr, nullptr, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(conv2d_bwd(g, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, false, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace remat::cpu
