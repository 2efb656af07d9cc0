// LayerNorm: a known row, the stored statistics, finite-difference backward for
// dx, dgamma and dbeta, and accumulate semantics.
#include <cmath>
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

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                  const std::vector<double>& b, int64_t rows, int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x[r * cols + c] - mean, 2);
    var /= cols;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = (x[r * cols + c] - mean) * rstd * g[c] + b[c];
  }
  return y;
}

TEST(LayerNorm, ForwardOfKnownRow) {
  // Row [1 2 3 4]: mean 2.5, biased variance 1.25.
  const float x[] = {1, 2, 3, 4, 10, 10, 10, 10};
  const float gamma[] = {1, 2, 1, 1};
  const float beta[] = {0, 0, 0.5f, 0};
  float y[8], stats[4];
  layernorm_fwd(x, gamma, beta, y, stats, 2, 4);
  const double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_FLOAT_EQ(stats[0], 2.5f);   // mean row 0
  EXPECT_FLOAT_EQ(stats[1], 10.0f);  // mean row 1
  EXPECT_FLOAT_EQ(stats[2], static_cast<float>(rstd));
  EXPECT_FLOAT_EQ(stats[3], static_cast<float>(1.0 / std::sqrt(1e-5)));  // constant row: eps only
  EXPECT_NEAR(y[0], -1.5 * rstd, 1e-6);
  EXPECT_NEAR(y[1], 2 * -0.5 * rstd, 1e-6);
  EXPECT_NEAR(y[2], 0.5 * rstd + 0.5, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * rstd, 1e-6);
  EXPECT_NEAR(y[0], -1.3416355, 1e-6);
  // A constant row normalises to zero, leaving beta.
  for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(y[4 + c], beta[c]);
}

TEST(LayerNorm, LargeMeanDoesNotCancel) {
  const float x[] = {10000.0f, 10001.0f, 10002.0f, 10003.0f};
  const float gamma[] = {1, 1, 1, 1}, beta[] = {0, 0, 0, 0};
  float y[4], stats[2];
  layernorm_fwd(x, gamma, beta, y, stats, 1, 4);
  EXPECT_NEAR(y[0], -1.3416355, 1e-5);
  EXPECT_NEAR(y[3], 1.3416355, 1e-5);
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  struct Case {
    int64_t rows, cols;
  };
  for (const Case s : {Case{3, 8}, Case{1, 5}, Case{5, 64}}) {
    SCOPED_TRACE(testing::Message() << s.rows << "x" << s.cols);
    const auto x = random_floats(s.rows * s.cols, 51);
    const auto gamma = random_floats(s.cols, 52, 0.5f, 1.5f);
    const auto beta = random_floats(s.cols, 53);
    const auto dy = random_floats(x.size(), 54);
    std::vector<float> y(x.size()), stats(2 * s.rows);
    layernorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), stats.data(), s.rows, s.cols);
    std::vector<float> dx(x.size()), dgamma(s.cols, 0.0f), dbeta(s.cols, 0.0f);
    layernorm_bwd(x.data(), stats.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(),
                  dbeta.data(), s.rows, s.cols, false);

    auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta);
    auto loss = [&] { return weighted_sum(layernorm_ref(xd, gd, bd, s.rows, s.cols), dy); };
    expect_grad_near(dx, numeric_grad(xd, loss), "dx");
    expect_grad_near(dgamma, numeric_grad(gd, loss), "dgamma");
    expect_grad_near(dbeta, numeric_grad(bd, loss), "dbeta");
  }
}

TEST(LayerNorm, AccumulateFalseOverwritesTrueAddsParamsAlwaysAdd) {
  const int64_t rows = 4, cols = 6;
  const auto x = random_floats(rows * cols, 55);
  const auto gamma = random_floats(cols, 56);
  const auto beta = random_floats(cols, 57);
  const auto dy = random_floats(x.size(), 58);
  std::vector<float> y(x.size()), stats(2 * rows);
  layernorm_fwd(x.data(), gamma.data(), beta.data(), y.data(), stats.data(), rows, cols);

  std::vector<float> fresh(x.size(), 0.0f), dg0(cols, 0.0f), db0(cols, 0.0f);
  layernorm_bwd(x.data(), stats.data(), gamma.data(), dy.data(), fresh.data(), dg0.data(),
                db0.data(), rows, cols, false);

  auto over = garbage(x.size());
  const auto dg_start = garbage(cols), db_start = garbage(cols);
  auto dg = dg_start, db = db_start;
  layernorm_bwd(x.data(), stats.data(), gamma.data(), dy.data(), over.data(), dg.data(), db.data(),
                rows, cols, false);
  EXPECT_EQ(over, fresh);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_NEAR(dg[c], dg_start[c] + dg0[c], 1e-5f);
    EXPECT_NEAR(db[c], db_start[c] + db0[c], 1e-5f);
  }

  const auto start = garbage(x.size());
  auto added = start;
  layernorm_bwd(x.data(), stats.data(), gamma.data(), dy.data(), added.data(), dg.data(), db.data(),
                rows, cols, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
}

}  // namespace
}  // namespace remat::cpu
