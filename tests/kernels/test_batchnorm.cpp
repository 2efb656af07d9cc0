// Batch normalisation in training mode: a channel worked by hand (statistics,
// output, running-statistics update), a double reference over several shapes,
// finite-difference backwards, accumulate semantics and determinism.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
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

struct Shape {
  int64_t n, c, hw;
};
const Shape kShapes[] = {{2, 3, 5}, {4, 2, 1}, {1, 4, 9}, {3, 1, 17}};

std::vector<double> bn_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                           const std::vector<double>& beta, Shape s) {
  std::vector<double> y(x.size());
  const double m = static_cast<double>(s.n * s.hw);
  for (int64_t ch = 0; ch < s.c; ++ch) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j = 0; j < s.hw; ++j) mean += x[(i * s.c + ch) * s.hw + j];
    mean /= m;
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j = 0; j < s.hw; ++j) var += std::pow(x[(i * s.c + ch) * s.hw + j] - mean, 2);
    var /= m;
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j = 0; j < s.hw; ++j) {
        const int64_t at = (i * s.c + ch) * s.hw + j;
        y[at] = (x[at] - mean) / std::sqrt(var + 1e-5) * gamma[ch] + beta[ch];
      }
  }
  return y;
}

TEST(BatchNorm, OneChannelByHand) {
  // n = 2, c = 2, hw = 2. Channel 0 holds {1, 2} and {3, 4}: mean 2.5, biased
  // variance 1.25, unbiased 5/3. Channel 1 is constant 7: variance 0.
  const float x[] = {1, 2, 7, 7, 3, 4, 7, 7};
  const float gamma[] = {2, 1}, beta[] = {0.5f, -1};
  float y[8], mean[2], invstd[2];
  float rmean[] = {1.0f, 0.0f}, rvar[] = {2.0f, 1.0f};
  batchnorm_fwd(x, gamma, beta, y, mean, invstd, rmean, rvar, 2, 2, 2, 1e-5f, 0.1f);
  const double inv0 = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_FLOAT_EQ(mean[1], 7.0f);
  EXPECT_FLOAT_EQ(invstd[0], static_cast<float>(inv0));
  EXPECT_FLOAT_EQ(invstd[1], static_cast<float>(1.0 / std::sqrt(1e-5)));
  EXPECT_NEAR(y[0], -1.5 * inv0 * 2 + 0.5, 1e-6);
  EXPECT_NEAR(y[1], -0.5 * inv0 * 2 + 0.5, 1e-6);
  EXPECT_NEAR(y[4], 0.5 * inv0 * 2 + 0.5, 1e-6);
  EXPECT_NEAR(y[5], 1.5 * inv0 * 2 + 0.5, 1e-6);
  for (int i : {2, 3, 6, 7}) EXPECT_EQ(y[i], -1.0f) << i;  // constant channel: beta
  // running = 0.9·running + 0.1·batch, with the unbiased variance.
  EXPECT_FLOAT_EQ(rmean[0], 0.9f * 1.0f + 0.1f * 2.5f);
  EXPECT_FLOAT_EQ(rmean[1], 0.1f * 7.0f);
  EXPECT_FLOAT_EQ(rvar[0], static_cast<float>(0.9 * 2.0 + 0.1 * 5.0 / 3.0));
  EXPECT_FLOAT_EQ(rvar[1], 0.9f);
}

TEST(BatchNorm, RunningStatisticsMayBeAbsent) {
  const Shape s{2, 3, 5};
  const auto x = random_floats(s.n * s.c * s.hw, 70);
  const auto gamma = random_floats(s.c, 71), beta = random_floats(s.c, 72);
  std::vector<float> y1(x.size()), y2(x.size()), m1(s.c), m2(s.c), i1(s.c), i2(s.c);
  std::vector<float> rm(s.c, 0.0f), rv(s.c, 1.0f);
  batchnorm_fwd(x.data(), gamma.data(), beta.data(), y1.data(), m1.data(), i1.data(), rm.data(), rv.data(), s.n,
                s.c, s.hw, 1e-5f, 0.1f);
  batchnorm_fwd(x.data(), gamma.data(), beta.data(), y2.data(), m2.data(), i2.data(), nullptr, nullptr, s.n, s.c,
                s.hw, 1e-5f, 0.1f);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(i1, i2);
}

TEST(BatchNorm, ForwardMatchesReference) {
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << s.n << "x" << s.c << "x" << s.hw);
    const auto x = random_floats(s.n * s.c * s.hw, 73);
    const auto gamma = random_floats(s.c, 74, 0.5f, 1.5f), beta = random_floats(s.c, 75);
    std::vector<float> y(x.size()), mean(s.c), invstd(s.c);
    batchnorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), invstd.data(), nullptr, nullptr, s.n,
                  s.c, s.hw, 1e-5f, 0.1f);
    const auto ref = bn_ref(to_double(x), to_double(gamma), to_double(beta), s);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * (1.0 + std::abs(ref[i]))) << i;
  }
}

TEST(BatchNorm, LargeMeanDoesNotCancel) {
  // Two images of one channel, {10000, 10001} and {10002, 10003}: as the row
  // [1 2 3 4] shifted, so ±1.3416355 at the ends.
  const float x[] = {10000.0f, 10001.0f, 10002.0f, 10003.0f};
  const float gamma[] = {1}, beta[] = {0};
  float y[4], mean[1], invstd[1];
  batchnorm_fwd(x, gamma, beta, y, mean, invstd, nullptr, nullptr, 2, 1, 2, 1e-5f, 0.1f);
  EXPECT_NEAR(y[0], -1.3416355, 1e-5);
  EXPECT_NEAR(y[3], 1.3416355, 1e-5);
}

TEST(BatchNorm, OneValuePerChannelIsRejected) {
  const float x[] = {1, 2}, gamma[] = {1, 1}, beta[] = {0, 0};
  float y[2], mean[2], invstd[2];
  EXPECT_THROW(batchnorm_fwd(x, gamma, beta, y, mean, invstd, nullptr, nullptr, 1, 2, 1, 1e-5f, 0.1f),
               std::invalid_argument);
}

struct BnRun {
  std::vector<float> x, gamma, beta, dy, y, mean, invstd;
};

BnRun forward(Shape s, uint32_t seed) {
  BnRun r;
  r.x = random_floats(s.n * s.c * s.hw, seed);
  r.gamma = random_floats(s.c, seed + 1, 0.5f, 1.5f);
  r.beta = random_floats(s.c, seed + 2);
  r.dy = random_floats(r.x.size(), seed + 3);
  r.y.resize(r.x.size());
  r.mean.resize(s.c);
  r.invstd.resize(s.c);
  batchnorm_fwd(r.x.data(), r.gamma.data(), r.beta.data(), r.y.data(), r.mean.data(), r.invstd.data(), nullptr,
                nullptr, s.n, s.c, s.hw, 1e-5f, 0.1f);
  return r;
}

void backward(const BnRun& r, Shape s, float* dx, float* dgamma, float* dbeta, bool accumulate) {
  batchnorm_bwd(r.x.data(), r.dy.data(), r.gamma.data(), r.mean.data(), r.invstd.data(), dx, dgamma, dbeta, s.n, s.c,
                s.hw, accumulate);
}

TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << s.n << "x" << s.c << "x" << s.hw);
    const BnRun r = forward(s, 76);
    std::vector<float> dx(r.x.size()), dgamma(s.c, 0.0f), dbeta(s.c, 0.0f);
    backward(r, s, dx.data(), dgamma.data(), dbeta.data(), false);
    auto xd = to_double(r.x), gd = to_double(r.gamma), bd = to_double(r.beta);
    auto loss = [&] { return weighted_sum(bn_ref(xd, gd, bd, s), r.dy); };
    expect_grad_near(dx, numeric_grad(xd, loss), "dx");
    expect_grad_near(dgamma, numeric_grad(gd, loss), "dgamma");
    expect_grad_near(dbeta, numeric_grad(bd, loss), "dbeta");
  }
}

TEST(BatchNorm, OverwriteNeverReadsDxAccumulateAddsExactly) {
  const Shape s{3, 4, 7};
  const BnRun r = forward(s, 77);
  std::vector<float> fresh(r.x.size()), dg0(s.c, 0.0f), db0(s.c, 0.0f);
  backward(r, s, fresh.data(), dg0.data(), db0.data(), false);

  std::vector<float> over(r.x.size(), std::numeric_limits<float>::quiet_NaN());
  const auto dg_start = garbage(s.c), db_start = garbage(s.c);
  auto dg = dg_start, db = db_start;
  backward(r, s, over.data(), dg.data(), db.data(), false);
  EXPECT_EQ(std::memcmp(over.data(), fresh.data(), over.size() * sizeof(float)), 0);
  for (int64_t i = 0; i < s.c; ++i) {
    EXPECT_EQ(dg[i], dg_start[i] + dg0[i]) << i;
    EXPECT_EQ(db[i], db_start[i] + db0[i]) << i;
  }

  const auto start = garbage(r.x.size());
  auto added = start;
  backward(r, s, added.data(), dg.data(), db.data(), true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
}

TEST(BatchNorm, RepeatsBitForBit) {
  const Shape s{4, 3, 33};
  const BnRun a = forward(s, 78), b = forward(s, 78);
  EXPECT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)), 0);
  std::vector<float> dx1(a.x.size()), dx2(a.x.size()), g1(s.c, 0), g2(s.c, 0), b1(s.c, 0), b2(s.c, 0);
  backward(a, s, dx1.data(), g1.data(), b1.data(), false);
  backward(a, s, dx2.data(), g2.data(), b2.data(), false);
  EXPECT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(b1.data(), b2.data(), b1.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace remat::cpu
