// MSE, binary cross-entropy on logits and softmax cross-entropy: known values, stability with large logits,
// finite-difference backwards and accumulate semantics.
#include <cmath>
#include <cstring>
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

double mse_ref(const std::vector<double>& x, const std::vector<float>& t) {
  double s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) s += (x[i] - t[i]) * (x[i] - t[i]);
  return s / static_cast<double>(x.size());
}

// A row's max and Σ exp(x − max), in float64 (the references below).
struct RowMaxSum {
  double max, sum;
};
RowMaxSum row_max_sum(const double* xr, int64_t classes) {
  double mx = xr[0];
  for (int64_t c = 1; c < classes; ++c) mx = std::max(mx, xr[c]);
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(xr[c] - mx);
  return {mx, sum};
}

double softmax_ce_ref(const std::vector<double>& x, const std::vector<int32_t>& labels,
                      int64_t classes) {
  const int64_t rows = static_cast<int64_t>(labels.size());
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto [mx, sum] = row_max_sum(x.data() + r * classes, classes);
    total += mx + std::log(sum) - x[r * classes + labels[r]];
  }
  return total / static_cast<double>(rows);
}

TEST(Mse, ForwardKnownValue) {
  const float x[] = {1, 2, 3}, t[] = {0, 2, 5};
  EXPECT_FLOAT_EQ(mse_fwd(x, t, 3), 5.0f / 3.0f);
  float dx[3];
  mse_bwd(x, t, dx, 3, false);
  EXPECT_FLOAT_EQ(dx[0], 2.0f / 3.0f);
  EXPECT_FLOAT_EQ(dx[1], 0.0f);
  EXPECT_FLOAT_EQ(dx[2], -4.0f / 3.0f);
}

TEST(Mse, BackwardMatchesFiniteDifferences) {
  const auto x = random_floats(50, 70);
  const auto t = random_floats(50, 71);
  std::vector<float> dx(50);
  mse_bwd(x.data(), t.data(), dx.data(), 50, false);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return mse_ref(xd, t); }), "dx");
}

TEST(Mse, AccumulateFalseOverwritesTrueAdds) {
  const auto x = random_floats(40, 72);
  const auto t = random_floats(40, 73);
  std::vector<float> fresh(40, 0.0f);
  mse_bwd(x.data(), t.data(), fresh.data(), 40, false);
  auto over = garbage(40);
  mse_bwd(x.data(), t.data(), over.data(), 40, false);
  EXPECT_EQ(over, fresh);
  const auto start = garbage(40);
  auto added = start;
  mse_bwd(x.data(), t.data(), added.data(), 40, true);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
}

double bce_logits_ref(const std::vector<double>& x, const std::vector<float>& t) {
  double s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = 1.0 / (1.0 + std::exp(-x[i]));
    s -= t[i] * std::log(p) + (1.0 - t[i]) * std::log1p(-p);
  }
  return s / static_cast<double>(x.size());
}

// BCEWithLogitsLoss: log 2 per element at a zero logit; large logits of
// either sign neither overflow nor lose the loss (−log σ(−30) is 30 and the
// naive form's log(1 - σ(30)) is log 0 in float); σ(x) − t over n for dx.
TEST(BceLogits, ForwardKnownValuesAndLargeLogits) {
  const float x[] = {0, 0, 30, -30}, t[] = {1, 0, 0, 0};
  // log 2, log 2, 30 + log1p(e⁻³⁰), log1p(e⁻³⁰).
  const double expected = (2 * std::log(2.0) + 30 + 2 * std::log1p(std::exp(-30.0))) / 4;
  EXPECT_NEAR(bce_logits_fwd(x, t, 4), expected, 1e-6);
  float dx[4];
  bce_logits_bwd(x, t, dx, 4, false);
  EXPECT_FLOAT_EQ(dx[0], -0.125f);
  EXPECT_FLOAT_EQ(dx[1], 0.125f);
  EXPECT_FLOAT_EQ(dx[2], 0.25f);
  EXPECT_NEAR(dx[3], 0.0f, 1e-13);
}

TEST(BceLogits, MatchesTheFloat64ReferenceAndItsFiniteDifferences) {
  auto x = random_floats(60, 80);
  for (float& v : x) v *= 6;  // logits well past the sigmoid's linear part
  std::vector<float> t(60);
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 3 == 0 ? 0.25f : static_cast<float>(i % 2);  // soft labels too
  auto xd = to_double(x);
  EXPECT_NEAR(bce_logits_fwd(x.data(), t.data(), 60), bce_logits_ref(xd, t), 1e-6);
  std::vector<float> dx(60);
  bce_logits_bwd(x.data(), t.data(), dx.data(), 60, false);
  expect_grad_near(dx, numeric_grad(xd, [&] { return bce_logits_ref(xd, t); }), "dx");
  const auto start = garbage(60);
  auto added = start;
  bce_logits_bwd(x.data(), t.data(), added.data(), 60, true);
  for (size_t i = 0; i < 60; ++i) EXPECT_EQ(added[i], start[i] + dx[i]) << i;
}

TEST(SoftmaxCe, ForwardKnownLogits) {
  // Row 0 uniform over 3 classes: log 3. Row 1: log(1 + e⁻¹ + e⁻²).
  const float logits[] = {0, 0, 0, 1, 2, 3};
  const int32_t labels[] = {1, 2};
  const double expected = (std::log(3.0) + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0))) / 2;
  EXPECT_NEAR(softmax_ce_fwd(logits, labels, 2, 3), expected, 1e-6);

  float dx[6];
  softmax_ce_bwd(logits, labels, dx, 2, 3, false);
  // (softmax - onehot) / rows
  EXPECT_NEAR(dx[0], (1.0 / 3) / 2, 1e-7);
  EXPECT_NEAR(dx[1], (1.0 / 3 - 1) / 2, 1e-7);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(dx[3], std::exp(1.0) / z / 2, 1e-7);
  EXPECT_NEAR(dx[5], (std::exp(3.0) / z - 1) / 2, 1e-7);
}

TEST(SoftmaxCe, StableForLargeLogits) {
  const float logits[] = {1000, 0, -1000, 1000, 0, -1000};
  const int32_t labels[] = {0, 1};
  // Row 0 is certain and right (0), row 1 is off by 1000.
  EXPECT_NEAR(softmax_ce_fwd(logits, labels, 2, 3), 500.0f, 1e-3);
  float dx[6];
  softmax_ce_bwd(logits, labels, dx, 2, 3, false);
  for (const float v : dx) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(dx[0], 0.0f, 1e-7);
  EXPECT_NEAR(dx[3], 0.5f, 1e-7);
  EXPECT_NEAR(dx[4], -0.5f, 1e-7);
}

TEST(SoftmaxCe, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 6, classes = 7;
  const auto x = random_floats(rows * classes, 74, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1, 5};
  std::vector<float> dx(x.size());
  softmax_ce_bwd(x.data(), labels.data(), dx.data(), rows, classes, false);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return softmax_ce_ref(xd, labels, classes); }), "dx");
  EXPECT_NEAR(softmax_ce_fwd(x.data(), labels.data(), rows, classes),
              softmax_ce_ref(to_double(x), labels, classes), 1e-5);
}

TEST(SoftmaxCe, AccumulateFalseOverwritesTrueAdds) {
  const int64_t rows = 3, classes = 4;
  const auto x = random_floats(rows * classes, 75);
  const std::vector<int32_t> labels = {2, 0, 3};
  std::vector<float> fresh(x.size(), 0.0f);
  softmax_ce_bwd(x.data(), labels.data(), fresh.data(), rows, classes, false);
  auto over = garbage(x.size());
  softmax_ce_bwd(x.data(), labels.data(), over.data(), rows, classes, false);
  EXPECT_EQ(over, fresh);
  const auto start = garbage(x.size());
  auto added = start;
  softmax_ce_bwd(x.data(), labels.data(), added.data(), rows, classes, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
}

TEST(SoftmaxCe, RejectsOutOfRangeLabel) {
  const float logits[] = {0, 1, 2, 3};
  const int32_t bad_high[] = {0, 2}, bad_low[] = {-1, 0};
  float dx[4];
  EXPECT_THROW(softmax_ce_fwd(logits, bad_high, 2, 2), std::out_of_range);
  EXPECT_THROW(softmax_ce_bwd(logits, bad_low, dx, 2, 2, false), std::out_of_range);
}

// Keeping the log-probabilities (as PyTorch's log_softmax + nll_loss): logp
// is log softmax of each row, the loss is the logits path's to the bit, and
// the backward from logp alone is the same gradient (finite differences) and
// accumulates as the other.
TEST(SoftmaxCe, KeepingLogProbsGivesTheSameLossAndGradient) {
  const int64_t rows = 6, classes = 7;
  const auto x = random_floats(rows * classes, 76, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1, 5};
  std::vector<float> logp(x.size());
  const float loss = softmax_ce_fwd_keep_logp(x.data(), labels.data(), logp.data(), rows, classes);
  EXPECT_EQ(loss, softmax_ce_fwd(x.data(), labels.data(), rows, classes));
  const auto xd = to_double(x);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(xd[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c)
      EXPECT_NEAR(logp[r * classes + c], xd[r * classes + c] - std::log(sum), 1e-6) << r << "," << c;
  }
  std::vector<float> dx(x.size()), from_logits(x.size());
  softmax_ce_bwd_from_logp(logp.data(), labels.data(), dx.data(), rows, classes, false);
  auto xn = xd;
  expect_grad_near(dx, numeric_grad(xn, [&] { return softmax_ce_ref(xn, labels, classes); }), "dx");
  softmax_ce_bwd(x.data(), labels.data(), from_logits.data(), rows, classes, false);
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], from_logits[i], 1e-7) << i;
  const auto start = garbage(x.size());
  auto added = start;
  softmax_ce_bwd_from_logp(logp.data(), labels.data(), added.data(), rows, classes, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + dx[i]) << i;
  const int32_t bad[] = {7, 0, 0, 0, 0, 0};
  EXPECT_THROW(softmax_ce_bwd_from_logp(logp.data(), bad, dx.data(), rows, classes, false), std::out_of_range);
}

// Label smoothing ε (PyTorch's label_smoothing): the loss against the target
// (1 − ε)·onehot + ε/classes, −Σ_c target_c·log p_c per row, mean over rows,
// in float64 from the float logits.
double smoothed_ce_ref(const std::vector<double>& x, const std::vector<int32_t>& labels, int64_t classes, double eps) {
  const int64_t rows = static_cast<int64_t>(labels.size());
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * classes;
    const auto [mx, sum] = row_max_sum(xr, classes);
    const double lse = mx + std::log(sum);
    for (int64_t c = 0; c < classes; ++c)
      total -= ((c == labels[r] ? 1.0 - eps : 0.0) + eps / static_cast<double>(classes)) * (xr[c] - lse);
  }
  return total / static_cast<double>(rows);
}

// (softmax − target) / rows in float64: the gradient the kernels round once.
// `bound` gets each element's error bound: the final rounding (2⁻²⁴·|g|, twice
// for slack) plus p's own error, as the kernels form x − max in float (one
// rounding of |x − max|) before exp: p·|x − max|·2⁻²⁴/rows, which p − target
// does not cancel.
std::vector<double> smoothed_ce_grad_ref(const std::vector<double>& x, const std::vector<int32_t>& labels,
                                         int64_t classes, double eps, std::vector<double>& bound) {
  const int64_t rows = static_cast<int64_t>(labels.size());
  std::vector<double> g(x.size());
  bound.assign(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * classes;
    const auto [mx, sum] = row_max_sum(xr, classes);
    for (int64_t c = 0; c < classes; ++c) {
      const double target = (c == labels[r] ? 1.0 - eps : 0.0) + eps / static_cast<double>(classes);
      const double p = std::exp(xr[c] - mx) / sum;
      g[r * classes + c] = (p - target) / static_cast<double>(rows);
      bound[r * classes + c] = std::ldexp(2 * std::abs(g[r * classes + c]) + p * (mx - xr[c] + 1) / rows, -24);
    }
  }
  return g;
}

// Both paths (keeping the logits, keeping logp) at ε = 0.1, 0.37 and 1 (the
// uniform target): the loss within 2 float32 roundings of float64's, every
// gradient element within its derived bound of (p − target)/rows (below),
// central differences agree, the two paths give the same loss
// bits, and accumulate adds.
TEST(SoftmaxCe, LabelSmoothingMatchesFloat64AndFiniteDifferences) {
  const int64_t rows = 9, classes = 13;
  const auto x = random_floats(rows * classes, 77, -4.0f, 4.0f);
  const std::vector<int32_t> labels = {0, 12, 3, 3, 7, 5, 11, 1, 9};
  const auto xd = to_double(x);
  for (const double eps : {0.1, 0.37, 1.0}) {
    const std::string name = "eps " + std::to_string(eps);
    const double want = smoothed_ce_ref(xd, labels, classes, eps);
    const float loss = softmax_ce_fwd(x.data(), labels.data(), rows, classes, eps);
    EXPECT_LE(std::abs(loss - want), 2 * std::ldexp(std::abs(want), -24)) << name;
    std::vector<float> logp(x.size());
    EXPECT_EQ(softmax_ce_fwd_keep_logp(x.data(), labels.data(), logp.data(), rows, classes, eps), loss) << name;
    std::vector<double> bound;
    const auto g = smoothed_ce_grad_ref(xd, labels, classes, eps, bound);
    std::vector<float> dx(x.size()), from_logp(x.size());
    softmax_ce_bwd(x.data(), labels.data(), dx.data(), rows, classes, false, eps);
    softmax_ce_bwd_from_logp(logp.data(), labels.data(), from_logp.data(), rows, classes, false, eps);
    for (size_t i = 0; i < dx.size(); ++i) {
      EXPECT_LE(std::abs(dx[i] - g[i]), bound[i]) << name << " " << i;
      // logp is rounded to float: exp(logp) is off by up to |logp|·2⁻²⁴ relative.
      EXPECT_LE(std::abs(from_logp[i] - g[i]), 1e-7) << name << " from logp " << i;
    }
    auto xn = xd;
    expect_grad_near(dx, numeric_grad(xn, [&] { return smoothed_ce_ref(xn, labels, classes, eps); }), name);
    const auto start = garbage(x.size());
    auto added = start, added_logp = start;
    softmax_ce_bwd(x.data(), labels.data(), added.data(), rows, classes, true, eps);
    softmax_ce_bwd_from_logp(logp.data(), labels.data(), added_logp.data(), rows, classes, true, eps);
    for (size_t i = 0; i < added.size(); ++i) {
      EXPECT_EQ(added[i], start[i] + dx[i]) << name << " " << i;
      EXPECT_EQ(added_logp[i], start[i] + from_logp[i]) << name << " " << i;
    }
  }
}

// Known values: a uniform row costs log 3 whatever ε; row {1, 2, 3} with label
// 0 at ε = 0.3 costs 0.7·(lse − 1) + 0.3·(lse − 2), lse = log(e + e² + e³). ε = 0
// is the plain loss to the bit, and the smoothed gradient of each row sums to 0.
TEST(SoftmaxCe, LabelSmoothingKnownValues) {
  const float logits[] = {0, 0, 0, 1, 2, 3};
  const int32_t labels[] = {1, 0};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double want = (std::log(3.0) + 0.7 * (lse - 1) + 0.3 * (lse - 2)) / 2;
  EXPECT_NEAR(softmax_ce_fwd(logits, labels, 2, 3, 0.3), want, 1e-6);
  EXPECT_EQ(softmax_ce_fwd(logits, labels, 2, 3, 0.0), softmax_ce_fwd(logits, labels, 2, 3));
  float dx[6], plain[6], zero[6];
  softmax_ce_bwd(logits, labels, dx, 2, 3, false, 0.3);
  EXPECT_NEAR(dx[0], (1.0 / 3 - 0.1) / 2, 1e-8);
  EXPECT_NEAR(dx[1], (1.0 / 3 - 0.8) / 2, 1e-8);
  EXPECT_NEAR(dx[0] + dx[1] + dx[2], 0.0, 1e-7);
  EXPECT_NEAR(dx[3] + dx[4] + dx[5], 0.0, 1e-7);
  softmax_ce_bwd(logits, labels, plain, 2, 3, false);
  softmax_ce_bwd(logits, labels, zero, 2, 3, false, 0.0);
  EXPECT_EQ(std::memcmp(plain, zero, sizeof plain), 0);
}

}  // namespace
}  // namespace remat::cpu
