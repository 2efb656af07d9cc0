// Linear and Dense: hand-computed forwards, float64 finite-difference backwards,
// accumulate semantics and bit-for-bit determinism of the Eigen GEMMs.
#include <cmath>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/act_ref.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::act_name;
using test::act_ref;
using test::expect_grad_near;
using test::garbage;
using test::numeric_grad;
using test::random_floats;
using test::to_double;
using test::weighted_sum;

struct Shape {
  int64_t rows, in, out;
};

// Degenerate dimensions take different Eigen paths (GEMV, coefficient-wise), so
// they are checked alongside an ordinary shape.
const Shape kShapes[] = {{3, 4, 5}, {1, 7, 3}, {4, 1, 2}, {5, 6, 1}, {17, 33, 9}};

std::vector<double> linear_ref(const std::vector<double>& x, const std::vector<double>& W,
                               const std::vector<double>& b, Shape s) {
  std::vector<double> y(s.rows * s.out);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < s.in; ++i) acc += x[r * s.in + i] * W[o * s.in + i];
      y[r * s.out + o] = acc;
    }
  return y;
}

TEST(Linear, ForwardMatchesHandComputed2x3) {
  const float x[] = {1, 2, 3, 4, 5, 6};            // (2, 3)
  const float W[] = {1, 0, -1, 0.5f, 0.5f, 0.5f};  // (2, 3)
  const float b[] = {0.1f, -0.2f};
  float y[4];
  linear_fwd(x, W, b, y, 2, 3, 2);
  EXPECT_FLOAT_EQ(y[0], 1 - 3 + 0.1f);
  EXPECT_FLOAT_EQ(y[1], 3 - 0.2f);
  EXPECT_FLOAT_EQ(y[2], 4 - 6 + 0.1f);
  EXPECT_FLOAT_EQ(y[3], 7.5f - 0.2f);
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << s.rows << "x" << s.in << "->" << s.out);
    const auto x = random_floats(s.rows * s.in, 1);
    const auto W = random_floats(s.out * s.in, 2);
    const auto b = random_floats(s.out, 3);
    const auto dy = random_floats(s.rows * s.out, 4);
    std::vector<float> dx(x.size()), dW(W.size(), 0.0f), db(b.size(), 0.0f);
    linear_bwd(x.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(), s.rows, s.in, s.out,
               false);

    auto xd = to_double(x), Wd = to_double(W), bd = to_double(b);
    auto loss = [&] { return weighted_sum(linear_ref(xd, Wd, bd, s), dy); };
    expect_grad_near(dx, numeric_grad(xd, loss), "dx");
    expect_grad_near(dW, numeric_grad(Wd, loss), "dW");
    expect_grad_near(db, numeric_grad(bd, loss), "db");
  }
}

TEST(Linear, AccumulateFalseOverwritesTrueAdds) {
  const Shape s{6, 5, 4};
  const auto x = random_floats(s.rows * s.in, 5);
  const auto W = random_floats(s.out * s.in, 6);
  const auto dy = random_floats(s.rows * s.out, 7);
  std::vector<float> dW(W.size(), 0.0f), db(s.out, 0.0f);

  std::vector<float> fresh(x.size(), 0.0f);
  linear_bwd(x.data(), W.data(), dy.data(), fresh.data(), dW.data(), db.data(), s.rows, s.in, s.out,
             false);

  auto over = garbage(x.size());
  linear_bwd(x.data(), W.data(), dy.data(), over.data(), dW.data(), db.data(), s.rows, s.in, s.out,
             false);
  EXPECT_EQ(over, fresh);

  const auto start = garbage(x.size());
  auto added = start;
  linear_bwd(x.data(), W.data(), dy.data(), added.data(), dW.data(), db.data(), s.rows, s.in, s.out,
             true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_NEAR(added[i], start[i] + fresh[i], 1e-5f);
}

TEST(Linear, ParameterGradientsAlwaysAccumulate) {
  const Shape s{3, 4, 2};
  const auto x = random_floats(s.rows * s.in, 8);
  const auto W = random_floats(s.out * s.in, 9);
  const auto dy = random_floats(s.rows * s.out, 10);
  std::vector<float> dx(x.size());
  std::vector<float> dW0(W.size(), 0.0f), db0(s.out, 0.0f);
  linear_bwd(x.data(), W.data(), dy.data(), dx.data(), dW0.data(), db0.data(), s.rows, s.in, s.out,
             false);

  const auto dW_start = garbage(W.size());
  const auto db_start = garbage(s.out);
  auto dW = dW_start, db = db_start;
  // Even with accumulate == false, which only concerns dx.
  linear_bwd(x.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(), s.rows, s.in, s.out,
             false);
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW[i], dW_start[i] + dW0[i], 1e-5f);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], db_start[i] + db0[i], 1e-5f);
}

TEST(Linear, ForwardIsBitIdenticalOnEveryCall) {
  const Shape s{64, 129, 33};
  const auto x = random_floats(s.rows * s.in, 11);
  const auto W = random_floats(s.out * s.in, 12);
  const auto b = random_floats(s.out, 13);
  std::vector<float> y1(s.rows * s.out), y2(s.rows * s.out);
  linear_fwd(x.data(), W.data(), b.data(), y1.data(), s.rows, s.in, s.out);
  linear_fwd(x.data(), W.data(), b.data(), y2.data(), s.rows, s.in, s.out);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
}

// Recomputed activations live in different allocations than the stored ones, so
// the result must not depend on where the buffers happen to be. The larger
// shapes reach Eigen's vectorised matrix-vector products (a batch of one, one
// output) and blocked GEMM, which AVX-512 builds could otherwise peel to the
// buffers' alignment.
TEST(Linear, ResultsDoNotDependOnBufferAlignment) {
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.insert(shapes.end(), {{1, 300, 70}, {70, 300, 1}, {33, 65, 17}, {64, 129, 33}});
  for (const Shape s : shapes) {
    SCOPED_TRACE(testing::Message() << s.rows << "x" << s.in << "->" << s.out);
    const auto x = random_floats(s.rows * s.in, 14);
    const auto W = random_floats(s.out * s.in, 15);
    const auto b = random_floats(s.out, 16);
    const auto dy = random_floats(s.rows * s.out, 17);
    std::vector<float> y_ref, dx_ref, dW_ref;
    for (int shift = 0; shift < 16; ++shift) {  // every float offset in a 64-byte line
      auto place = [shift](const std::vector<float>& v) {
        std::vector<float> buf(v.size() + 16, 0.0f);
        std::copy(v.begin(), v.end(), buf.begin() + shift);
        return buf;
      };
      auto xb = place(x), Wb = place(W), dyb = place(dy);
      std::vector<float> yb(s.rows * s.out + 16), dxb(x.size() + 16);
      std::vector<float> dWb(W.size() + 16, 0.0f), dbb(s.out + 16, 0.0f);
      linear_fwd(xb.data() + shift, Wb.data() + shift, b.data(), yb.data() + shift, s.rows, s.in,
                 s.out);
      linear_bwd(xb.data() + shift, Wb.data() + shift, dyb.data() + shift, dxb.data() + shift,
                 dWb.data() + shift, dbb.data(), s.rows, s.in, s.out, false);
      std::vector<float> y(yb.begin() + shift, yb.begin() + shift + s.rows * s.out);
      std::vector<float> dx(dxb.begin() + shift, dxb.begin() + shift + x.size());
      std::vector<float> dW(dWb.begin() + shift, dWb.begin() + shift + W.size());
      if (shift == 0) {
        y_ref = y, dx_ref = dx, dW_ref = dW;
        continue;
      }
      EXPECT_EQ(std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)), 0) << shift;
      EXPECT_EQ(std::memcmp(dx.data(), dx_ref.data(), dx.size() * sizeof(float)), 0) << shift;
      EXPECT_EQ(std::memcmp(dW.data(), dW_ref.data(), dW.size() * sizeof(float)), 0) << shift;
    }
  }
}

class DenseTest : public testing::TestWithParam<Act> {};

TEST_P(DenseTest, ForwardIsLinearThenActivation) {
  const float x[] = {1, -2, 3, 0.5f, 0.25f, -1};  // (2, 3)
  const float W[] = {1, 1, 1, -1, 0, 2};          // (2, 3)
  const float b[] = {-1, 0.5f};
  float y[4];
  dense_fwd(GetParam(), x, W, b, y, 2, 3, 2);
  const double pre[] = {1.0, 5.5, -1.25, -2.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], act_ref(GetParam(), pre[i]), 1e-6) << i;
}

TEST_P(DenseTest, BackwardMatchesFiniteDifferences) {
  const Act act = GetParam();
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << s.rows << "x" << s.in << "->" << s.out);
    const auto x = random_floats(s.rows * s.in, 21);
    const auto W = random_floats(s.out * s.in, 22);
    const auto b = random_floats(s.out, 23);
    const auto dy = random_floats(s.rows * s.out, 24);
    std::vector<float> y(s.rows * s.out), scratch(s.rows * s.out);
    dense_fwd(act, x.data(), W.data(), b.data(), y.data(), s.rows, s.in, s.out);
    std::vector<float> dx(x.size()), dW(W.size(), 0.0f), db(s.out, 0.0f);
    dense_bwd(act, x.data(), y.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(),
              scratch.data(), s.rows, s.in, s.out, false);

    auto xd = to_double(x), Wd = to_double(W), bd = to_double(b);
    auto loss = [&] {
      auto pre = linear_ref(xd, Wd, bd, s);
      for (auto& v : pre) v = act_ref(act, v);
      return weighted_sum(pre, dy);
    };
    expect_grad_near(dx, numeric_grad(xd, loss), "dx");
    expect_grad_near(dW, numeric_grad(Wd, loss), "dW");
    expect_grad_near(db, numeric_grad(bd, loss), "db");
  }
}

TEST_P(DenseTest, AccumulateFalseOverwritesTrueAdds) {
  const Act act = GetParam();
  const Shape s{4, 3, 5};
  const auto x = random_floats(s.rows * s.in, 25);
  const auto W = random_floats(s.out * s.in, 26);
  const auto b = random_floats(s.out, 27);
  const auto dy = random_floats(s.rows * s.out, 28);
  std::vector<float> y(s.rows * s.out), scratch(s.rows * s.out);
  dense_fwd(act, x.data(), W.data(), b.data(), y.data(), s.rows, s.in, s.out);
  std::vector<float> dW(W.size(), 0.0f), db(s.out, 0.0f);
  auto run = [&](std::vector<float>& dx, bool accumulate) {
    dense_bwd(act, x.data(), y.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(),
              scratch.data(), s.rows, s.in, s.out, accumulate);
  };
  std::vector<float> fresh(x.size(), 0.0f);
  run(fresh, false);
  auto over = garbage(x.size());
  run(over, false);
  EXPECT_EQ(over, fresh);
  const auto start = garbage(x.size());
  auto added = start;
  run(added, true);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_NEAR(added[i], start[i] + fresh[i], 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Acts, DenseTest, testing::Values(Act::None, Act::ReLU, Act::Tanh),
                         act_name);

// Dense keeps only y; GELU and SiLU differentiate from the pre-activation, and
// Sigmoid is outside the set Dense promises (None, ReLU, Tanh).
TEST(Dense, RejectsActivationsOutsideItsSet) {
  const float x[] = {1}, W[] = {1}, b[] = {0}, dy[] = {1};
  float y[1], dx[1], dW[1] = {0}, db[1] = {0}, scratch[1];
  for (const Act act : {Act::GELU, Act::Sigmoid, Act::SiLU}) {
    SCOPED_TRACE(static_cast<int>(act));
    EXPECT_THROW(dense_fwd(act, x, W, b, y, 1, 1, 1), std::invalid_argument);
    EXPECT_THROW(dense_bwd(act, x, y, W, dy, dx, dW, db, scratch, 1, 1, 1, false), std::invalid_argument);
  }
}

}  // namespace
}  // namespace remat::cpu
