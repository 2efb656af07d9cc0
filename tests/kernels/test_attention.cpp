// Attention pieces: batched matmul in all four transpose layouts, softmax,
// scale and the repeating masked fill, against direct implementations and
// finite differences; accumulate semantics; determinism.
#include <cmath>
#include <cstring>
#include <limits>
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

struct Bmm {
  int64_t batch, m, n, k;
  bool ta, tb;
};

std::string bmm_name(const testing::TestParamInfo<Bmm>& info) {
  const Bmm& s = info.param;
  return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
         std::to_string(s.k) + (s.ta ? "_ta" : "") + (s.tb ? "_tb" : "");
}

std::vector<Bmm> bmm_cases() {
  std::vector<Bmm> v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      v.push_back({3, 4, 5, 6, ta, tb});
      v.push_back({2, 1, 7, 3, ta, tb});  // a single row: Eigen's GEMV path
    }
  v.push_back({1, 33, 17, 40, false, true});  // larger than Eigen's small-product cutoff
  return v;
}

// Element (i, j) of an operand stored (rows, cols), or (cols, rows) when transposed.
double at(const std::vector<double>& p, int64_t base, int64_t rows, int64_t cols, bool trans, int64_t i, int64_t j) {
  return trans ? p[base + j * rows + i] : p[base + i * cols + j];
}

std::vector<double> bmm_ref(const Bmm& s, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(s.batch * s.m * s.n);
  for (int64_t t = 0; t < s.batch; ++t)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0.0;
        for (int64_t l = 0; l < s.k; ++l)
          acc += at(a, t * s.m * s.k, s.m, s.k, s.ta, i, l) * at(b, t * s.k * s.n, s.k, s.n, s.tb, l, j);
        c[(t * s.m + i) * s.n + j] = acc;
      }
  return c;
}

class BmmTest : public testing::TestWithParam<Bmm> {};

TEST_P(BmmTest, ForwardMatchesDirectProductAndAccumulates) {
  const Bmm s = GetParam();
  const auto a = random_floats(s.batch * s.m * s.k, 90), b = random_floats(s.batch * s.k * s.n, 91);
  std::vector<float> c(s.batch * s.m * s.n, std::numeric_limits<float>::quiet_NaN());
  bmm(a.data(), b.data(), c.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb, false);
  const auto ref = bmm_ref(s, to_double(a), to_double(b));
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], ref[i], 1e-5 * (1.0 + std::abs(ref[i]))) << i;
  const auto start = garbage(c.size());
  auto added = start;
  bmm(a.data(), b.data(), added.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb, true);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(added[i], start[i] + c[i], 1e-5f) << i;
}

TEST_P(BmmTest, BackwardMatchesFiniteDifferences) {
  const Bmm s = GetParam();
  const auto a = random_floats(s.batch * s.m * s.k, 92), b = random_floats(s.batch * s.k * s.n, 93);
  const auto dc = random_floats(s.batch * s.m * s.n, 94);
  std::vector<float> da(a.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> db(b.size(), std::numeric_limits<float>::quiet_NaN());
  bmm_bwd(a.data(), b.data(), dc.data(), da.data(), db.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb, false, false);
  auto ad = to_double(a), bd = to_double(b);
  auto loss = [&] { return weighted_sum(bmm_ref(s, ad, bd), dc); };
  expect_grad_near(da, numeric_grad(ad, loss), "da");
  expect_grad_near(db, numeric_grad(bd, loss), "db");

  // Each gradient on its own, each with its own accumulate flag.
  const auto start = garbage(b.size());
  auto db_added = start;
  bmm_bwd(a.data(), b.data(), dc.data(), nullptr, db_added.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb, false, true);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db_added[i], start[i] + db[i], 1e-5f) << i;
  std::vector<float> da_only(a.size(), std::numeric_limits<float>::quiet_NaN());
  bmm_bwd(a.data(), b.data(), dc.data(), da_only.data(), nullptr, s.batch, s.m, s.n, s.k, s.ta, s.tb, false, true);
  EXPECT_EQ(std::memcmp(da_only.data(), da.data(), da.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, BmmTest, testing::ValuesIn(bmm_cases()), bmm_name);

// A broadcast MatMul's run: every product reads the one b (stride 0), a
// transposed; c matrices sit 3 floats apart and the gaps keep their values;
// a second call with accumulate adds the same products again.
TEST(GemmStrided, StrideZeroOperandAndGappedResult) {
  const int64_t batch = 3, m = 4, n = 5, k = 6, sc = m * n + 3;
  const auto a = random_floats(batch * m * k, 92), b = random_floats(k * n, 93);
  const std::vector<float> c0 = garbage(batch * sc);
  std::vector<float> c = c0;
  gemm_strided(a.data(), b.data(), c.data(), batch, m, n, k, true, false, false, m * k, 0, sc);
  std::vector<float> twice = c;
  gemm_strided(a.data(), b.data(), twice.data(), batch, m, n, k, true, false, true, m * k, 0, sc);
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0;  // a_t stored (k, m): element (i, l) at l·m + i
        for (int64_t l = 0; l < k; ++l) ref += double(a[t * m * k + l * m + i]) * double(b[l * n + j]);
        const int64_t at_c = t * sc + i * n + j;
        EXPECT_NEAR(c[at_c], ref, 1e-5 * (1 + std::abs(ref))) << t << "," << i << "," << j;
        EXPECT_NEAR(twice[at_c], 2 * ref, 2e-5 * (1 + std::abs(ref))) << t << "," << i << "," << j;
      }
    for (int64_t g = m * n; g < sc && t * sc + g < batch * sc; ++g) EXPECT_EQ(c[t * sc + g], c0[t * sc + g]);
  }
}

std::vector<double> softmax_ref(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(x[r * cols + c] - mx) / sum;
  }
  return y;
}

TEST(Softmax, ForwardMatchesReferenceWithoutOverflow) {
  const int64_t rows = 5, cols = 37;
  auto x = random_floats(rows * cols, 95, -6.0f, 6.0f);
  for (int64_t c = 0; c < cols; ++c) x[cols + c] += 1000.0f;  // exp(1000) overflows float
  std::vector<float> y(x.size());
  softmax_fwd(x.data(), y.data(), rows, cols);
  const auto ref = softmax_ref(to_double(x), rows, cols);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-6 + 1e-5 * ref[i]) << i;
}

TEST(Softmax, MaskedEntriesGetZeroAndAFullyMaskedRowIsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float x[] = {0.0f, -inf, std::log(3.0f), -inf, -inf, -inf};
  float y[6];
  softmax_fwd(x, y, 2, 3);
  EXPECT_FLOAT_EQ(y[0], 0.25f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_FLOAT_EQ(y[2], 0.75f);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;  // as torch.softmax
}

TEST(Softmax, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t rows = 4, cols = 9;
  const auto x = random_floats(rows * cols, 96);
  const auto dy = random_floats(x.size(), 97);
  std::vector<float> y(x.size());
  softmax_fwd(x.data(), y.data(), rows, cols);
  std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
  softmax_bwd(y.data(), dy.data(), dx.data(), rows, cols, false);
  auto xd = to_double(x);
  expect_grad_near(dx, numeric_grad(xd, [&] { return weighted_sum(softmax_ref(xd, rows, cols), dy); }), "dx");
  const auto start = garbage(x.size());
  auto added = start;
  softmax_bwd(y.data(), dy.data(), added.data(), rows, cols, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], start[i] + dx[i]) << i;
  std::vector<float> again(x.size());
  softmax_bwd(y.data(), dy.data(), again.data(), rows, cols, false);
  EXPECT_EQ(std::memcmp(again.data(), dx.data(), dx.size() * sizeof(float)), 0);
}

TEST(Scale, ForwardAndBackward) {
  const auto x = random_floats(10, 98);
  std::vector<float> y(10), dx(10, std::numeric_limits<float>::quiet_NaN());
  scale_fwd(x.data(), y.data(), 10, 0.125f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(y[i], x[i] * 0.125f) << i;
  scale_bwd(x.data(), dx.data(), 10, -3.0f, false);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(dx[i], -3.0f * x[i]) << i;
  const auto start = garbage(10);
  auto added = start;
  scale_bwd(x.data(), added.data(), 10, -3.0f, true);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(added[i], start[i] + -3.0f * x[i]) << i;
}

TEST(MaskedFill, CausalMaskRepeatsOverBatchAndHeads) {
  const int64_t T = 3, reps = 4, n = reps * T * T;
  std::vector<uint8_t> mask(T * T);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) mask[i * T + j] = j > i ? 1 : 0;  // above the diagonal
  const auto x = random_floats(n, 99);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> y(n);
  masked_fill_fwd(x.data(), mask.data(), y.data(), n, T * T, -inf);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t i = (e / T) % T, j = e % T;
    EXPECT_EQ(y[e], j > i ? -inf : x[e]) << e;
  }
  const auto dy = random_floats(n, 100);
  std::vector<float> dx(n, std::numeric_limits<float>::quiet_NaN());
  masked_fill_bwd(dy.data(), mask.data(), dx.data(), n, T * T, false);
  for (int64_t e = 0; e < n; ++e) EXPECT_EQ(dx[e], mask[e % (T * T)] ? 0.0f : dy[e]) << e;
  const auto start = garbage(n);
  auto added = start;
  masked_fill_bwd(dy.data(), mask.data(), added.data(), n, T * T, true);
  for (int64_t e = 0; e < n; ++e) EXPECT_EQ(added[e], start[e] + dx[e]) << e;
}

TEST(MaskedFill, MaskThatDoesNotTileIsRejected) {
  const float x[6] = {};
  const uint8_t mask[4] = {};
  float y[6];
  EXPECT_THROW(masked_fill_fwd(x, mask, y, 6, 4, 0.0f), std::invalid_argument);
  EXPECT_THROW(masked_fill_bwd(x, mask, y, 6, 0, false), std::invalid_argument);
}

}  // namespace
}  // namespace remat::cpu
