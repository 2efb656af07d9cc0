// The pointwise family and the reductions (pointwise.cpp): every function of
// pointwise_fns.h, forward against its float64 evaluation and each operand's
// gradient against float64 central differences, on a strided (transposed)
// operand and broadcast ones; the reads columns are held to what the formulas
// use (the operands a derivative does not list are handed over as null).
#include <cmath>
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

// An operand: its own shape right-aligned to the output's rank 3 (1 where it
// broadcasts) and where its elements are stored: row-major, or transposed
// (stored as its reversed shape, read through the reversed strides).
struct Operand {
  std::vector<int64_t> dims;  // 3 dims
  bool transposed = false;
  std::vector<double> values;  // logical row-major
  int64_t n() const { return dims[0] * dims[1] * dims[2]; }
  std::vector<float> storage() const {
    std::vector<float> s(static_cast<std::size_t>(n()));
    for (int64_t i = 0; i < dims[0]; ++i)
      for (int64_t j = 0; j < dims[1]; ++j)
        for (int64_t k = 0; k < dims[2]; ++k) {
          const int64_t logical = (i * dims[1] + j) * dims[2] + k;
          const int64_t stored = transposed ? (k * dims[1] + j) * dims[0] + i : logical;
          s[static_cast<std::size_t>(stored)] = static_cast<float>(values[static_cast<std::size_t>(logical)]);
        }
    return s;
  }
  std::vector<int64_t> strides() const {
    if (transposed) return {1, dims[0], dims[0] * dims[1]};
    return {dims[1] * dims[2], dims[2], 1};
  }
};

constexpr int64_t kShape[3] = {2, 3, 4};

PwGeom geom(pw::Fn fn, const std::vector<Operand>& ops, float p, float q) {
  PwGeom g;
  g.rank = 3;
  g.arity = static_cast<int>(ops.size());
  g.fn = fn;
  g.p = p;
  g.q = q;
  for (int d = 0; d < 3; ++d) g.shape[d] = kShape[d];
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const auto st = ops[k].strides();
    for (int d = 0; d < 3; ++d) {
      g.dims[k][d] = ops[k].dims[static_cast<std::size_t>(d)];
      g.stride[k][d] = g.dims[k][d] == 1 ? 0 : st[static_cast<std::size_t>(d)];
    }
  }
  return g;
}

// The output element at (i, j, l) in double.
double ref_at(pw::Fn fn, const std::vector<Operand>& ops, int64_t i, int64_t j, int64_t l, double p, double q) {
  double v[3] = {0, 0, 0};
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const auto& d = ops[k].dims;
    const int64_t ii = d[0] == 1 ? 0 : i, jj = d[1] == 1 ? 0 : j, ll = d[2] == 1 ? 0 : l;
    v[k] = ops[k].values[static_cast<std::size_t>((ii * d[1] + jj) * d[2] + ll)];
  }
  return pw::forward<double>(fn, v[0], v[1], v[2], p, q);
}

std::vector<double> ref_forward(pw::Fn fn, const std::vector<Operand>& ops, double p, double q) {
  std::vector<double> y;
  for (int64_t i = 0; i < kShape[0]; ++i)
    for (int64_t j = 0; j < kShape[1]; ++j)
      for (int64_t l = 0; l < kShape[2]; ++l) y.push_back(ref_at(fn, ops, i, j, l, p, q));
  return y;
}

// Values in the function's domain, away from its kinks (FD needs a smooth neighbourhood).
std::vector<double> values_for(pw::Fn fn, int k, int64_t n, uint32_t seed, float p, float q) {
  using F = pw::Fn;
  float lo = -2.0f, hi = 2.0f;
  if (k == 0 && (fn == F::Log || fn == F::Sqrt || fn == F::Rsqrt || fn == F::Reciprocal || fn == F::Pow)) lo = 0.5f;
  if (k == 1 && fn == F::Div) lo = 0.5f;
  if (k == 1 && fn == F::Pow) lo = -1.5f, hi = 1.5f;
  if (fn == F::Hardswish || fn == F::Hardsigmoid) lo = -5.0f, hi = 5.0f;
  const auto r = random_floats(static_cast<std::size_t>(n), seed, lo, hi);
  std::vector<double> out;
  for (float x : r) {
    double v = x;
    if (fn == F::Where && k == 0) v = x > 0 ? 1.0 : 0.0;  // the condition
    // Kinks: 0 (abs, relu, leaky_relu), ±3 (hardswish, hardsigmoid), clamp's bounds.
    for (double kink : {0.0, 3.0, -3.0, static_cast<double>(p), static_cast<double>(q)})
      if (std::fabs(v - kink) < 1e-2 && !(fn == F::Where && k == 0)) v += 0.05;
    out.push_back(static_cast<float>(v));  // representable: the kernel reads the same value
  }
  return out;
}

struct Case {
  std::string what;
  std::vector<std::vector<int64_t>> dims;  // per operand
  std::vector<bool> transposed;
};

void check_fn(pw::Fn fn, const Case& cs, uint32_t seed) {
  const pw::FnInfo& info = pw::info(fn);
  float p = 0, q = 0;
  pw::attr_defaults(fn, p, q);
  if (fn == pw::Fn::LeakyReLU) p = 0.1f;
  if (fn == pw::Fn::ELU) p = 1.3f;
  if (fn == pw::Fn::Clamp) p = -1.0f, q = 1.0f;
  const std::string what = std::string(info.name) + " " + cs.what;
  std::vector<Operand> ops;
  for (int k = 0; k < info.arity; ++k) {
    Operand o{cs.dims[static_cast<std::size_t>(k)], cs.transposed[static_cast<std::size_t>(k)], {}};
    o.values = values_for(fn, k, o.n(), seed + static_cast<uint32_t>(k), p, q);
    ops.push_back(std::move(o));
  }
  const PwGeom g = geom(fn, ops, p, q);
  std::vector<std::vector<float>> stored;
  for (const auto& o : ops) stored.push_back(o.storage());
  const float* x[3] = {};
  for (std::size_t k = 0; k < ops.size(); ++k) x[k] = stored[k].data();
  std::vector<float> y(static_cast<std::size_t>(g.numel()));
  pointwise_fwd(g, x, y.data());
  const std::vector<double> want = ref_forward(fn, ops, p, q);
  for (std::size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << what << " forward [" << i << "]";

  const std::vector<float> w = random_floats(y.size(), seed + 7);
  for (int k = 0; k < info.arity; ++k) {
    if (fn == pw::Fn::Where && k == 0) continue;  // the condition has no gradient
    // Only what the derivative reads.
    const float* xr[3] = {};
    for (int j = 0; j < info.arity; ++j)
      if (info.reads[k] & (1 << j)) xr[j] = x[j];
    const float* yr = (info.reads[k] & pw::kY) ? y.data() : nullptr;
    std::vector<float> dx = garbage(static_cast<std::size_t>(ops[static_cast<std::size_t>(k)].n()));
    pointwise_bwd(g, k, xr, yr, w.data(), dx.data(), false);
    std::vector<double>& v = ops[static_cast<std::size_t>(k)].values;
    const auto objective = [&] {
      const std::vector<double> out = ref_forward(fn, ops, p, q);
      double s = 0;
      for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
      return s;
    };
    expect_grad_near(dx, numeric_grad(v, objective), what + " d/d operand " + std::to_string(k));
    // accumulate adds the very same values.
    std::vector<float> acc = garbage(dx.size());
    const std::vector<float> before = acc;
    pointwise_bwd(g, k, xr, yr, w.data(), acc.data(), true);
    for (std::size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(acc[i], before[i] + dx[i]) << what << " accumulate";
  }
}

TEST(Pointwise, EveryFunctionStridedAndBroadcast) {
  for (int f = 0; f < pw::kFnCount; ++f) {
    const auto fn = static_cast<pw::Fn>(f);
    const int arity = pw::kFns[f].arity;
    SCOPED_TRACE(pw::kFns[f].name);
    // Operand 0 transposed (strided); the others broadcast along different dimensions.
    check_fn(fn, Case{"(strided a, b broadcast (3,1), c (1,4))", {{2, 3, 4}, {1, 3, 1}, {1, 1, 4}}, {true, false, false}},
             100 + static_cast<uint32_t>(f));
    if (arity >= 2) {
      // a broadcast (its gradient sums), b strided.
      check_fn(fn, Case{"(a broadcast (1,3,1), b strided, c (2,1,4))", {{1, 3, 1}, {2, 3, 4}, {2, 1, 4}}, {false, true, false}},
               200 + static_cast<uint32_t>(f));
      // Both full, contiguous (the kernel's dense path).
      check_fn(fn, Case{"(dense)", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {false, false, false}}, 300 + static_cast<uint32_t>(f));
    }
  }
}

TEST(Pointwise, ReadsListEveryOperandItsDerivativeUses) {
  using F = pw::Fn;
  // PyTorch's saved tensors (derivatives.yaml): the memory model's contract.
  EXPECT_EQ(pw::info(F::Neg).reads[0], pw::kNone);
  EXPECT_EQ(pw::info(F::Exp).reads[0], pw::kY);
  EXPECT_EQ(pw::info(F::Rsqrt).reads[0], pw::kY);
  EXPECT_EQ(pw::info(F::Sigmoid).reads[0], pw::kY);
  EXPECT_EQ(pw::info(F::Log).reads[0], pw::kA);
  EXPECT_EQ(pw::info(F::Mul).reads[0], pw::kB);
  EXPECT_EQ(pw::info(F::Mul).reads[1], pw::kA);
  EXPECT_EQ(pw::info(F::Div).reads[1], pw::kA | pw::kB);
  EXPECT_EQ(pw::info(F::Add).reads[1], pw::kNone);
  EXPECT_EQ(pw::info(F::Where).reads[1], pw::kA);
}

TEST(Pointwise, MaximumSplitsATieAndPropagatesNaN) {
  PwGeom g;
  g.rank = 1;
  g.shape[0] = 3;
  g.arity = 2;
  g.fn = pw::Fn::Maximum;
  for (int k = 0; k < 2; ++k) g.dims[k][0] = 3, g.stride[k][0] = 1;
  const float a[] = {1, 2, NAN}, b[] = {1, 3, 0};
  const float* x[3] = {a, b, nullptr};
  float y[3];
  pointwise_fwd(g, x, y);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  const float dy[] = {4, 4, 4};
  float da[3], db[3];
  pointwise_bwd(g, 0, x, nullptr, dy, da, false);
  pointwise_bwd(g, 1, x, nullptr, dy, db, false);
  EXPECT_EQ(da[0], 2.0f);
  EXPECT_EQ(db[0], 2.0f);
  EXPECT_EQ(da[1], 0.0f);
  EXPECT_EQ(db[1], 4.0f);
}

// x.pow(2) squares as PyTorch does (a*a, and its gradient g*2*a), bit for
// bit, where glibc's powf(x, 2) rounds the other way: 0x1.001p-63 squared
// is a tie (powf rounds it up to 0x1.002002p-126), 0x1.0045bep-63's
// square lies off a tie (powf is one unit above); a subnormal square and
// an ordinary value too.
TEST(Pointwise, PowByTwoIsTheProductItself) {
  const float a[] = {0x1.001p-63f, -0x1.0045bep-63f, 0x1.8p-74f, 1.7f, -3.25f};
  const float two = 2.0f;
  PwGeom g;
  g.rank = 1;
  g.shape[0] = 5;
  g.arity = 2;
  g.fn = pw::Fn::Pow;
  g.dims[0][0] = 5, g.stride[0][0] = 1;
  g.dims[1][0] = 1, g.stride[1][0] = 0;  // the scalar exponent
  const float* x[3] = {a, &two, nullptr};
  float y[5];
  pointwise_fwd(g, x, y);
  const float dy[] = {0.5f, 3.0f, -1.0f, 0.1f, 7.0f};
  float da[5];
  pointwise_bwd(g, 0, x, y, dy, da, false);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(y[i], a[i] * a[i]) << i;
    EXPECT_EQ(da[i], dy[i] * 2.0f * a[i]) << i;
  }
  EXPECT_EQ(y[0], 0x1.002p-126f);  // the tie to even; powf gives 0x1.002002p-126
  EXPECT_EQ(y[2], 0x1p-147f);      // 4.5 units of the smallest subnormal, to even
}

TEST(Pointwise, RefusesABadGeometry) {
  PwGeom g;
  g.rank = 9;
  float y = 0;
  const float* x[3] = {&y, nullptr, nullptr};
  EXPECT_THROW(pointwise_fwd(g, x, &y), std::invalid_argument);
  g.rank = 1;
  g.shape[0] = 1;
  g.arity = 1;
  EXPECT_THROW(pointwise_bwd(g, 1, x, nullptr, &y, &y, false), std::invalid_argument);
}

// ---- reductions ----------------------------------------------------------------

void check_reduce(pw::ReduceFn fn, std::vector<bool> reduced, bool transposed, uint32_t seed) {
  Operand o{{2, 3, 4}, transposed, {}};
  for (float v : random_floats(24, seed)) o.values.push_back(v);
  ReduceGeom g;
  g.rank = 3;
  g.fn = fn;
  const auto st = o.strides();
  int64_t outn = 1;
  for (int d = 0; d < 3; ++d) {
    g.shape[d] = kShape[d];
    g.stride[d] = st[static_cast<std::size_t>(d)];
    g.reduced[d] = reduced[static_cast<std::size_t>(d)];
    if (!g.reduced[d]) outn *= kShape[d];
  }
  const std::string what = std::string(pw::kReduceNames[static_cast<int>(fn)]) + (transposed ? " strided" : "");
  const auto reference = [&](const std::vector<double>& v) {
    std::vector<double> out(static_cast<std::size_t>(outn), fn == pw::ReduceFn::Amax ? -INFINITY : 0.0);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t l = 0; l < 4; ++l) {
          int64_t at = 0;
          const int64_t idx[3] = {i, j, l};
          for (int d = 0; d < 3; ++d)
            if (!g.reduced[d]) at = at * kShape[d] + idx[d];
          const double x = v[static_cast<std::size_t>((i * 3 + j) * 4 + l)];
          double& r = out[static_cast<std::size_t>(at)];
          r = fn == pw::ReduceFn::Amax ? std::max(r, x) : r + x;
        }
    if (fn == pw::ReduceFn::Mean)
      for (double& r : out) r /= static_cast<double>(24 / outn);
    return out;
  };
  const std::vector<float> xs = o.storage();
  std::vector<float> y(static_cast<std::size_t>(outn));
  reduce_fwd(g, xs.data(), y.data());
  const auto want = reference(o.values);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << what;
  const std::vector<float> w = random_floats(y.size(), seed + 1);
  std::vector<float> dx = garbage(24);
  reduce_bwd(g, xs.data(), y.data(), w.data(), dx.data(), false);
  const auto objective = [&] {
    const auto out = reference(o.values);
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
  };
  expect_grad_near(dx, numeric_grad(o.values, objective), what);
}

TEST(Reduce, SumMeanAmaxOverAxesStrided) {
  for (auto fn : {pw::ReduceFn::Sum, pw::ReduceFn::Mean, pw::ReduceFn::Amax})
    for (const auto& axes : {std::vector<bool>{false, false, true}, std::vector<bool>{true, false, true},
                             std::vector<bool>{true, true, true}, std::vector<bool>{false, true, false}})
      for (bool transposed : {false, true}) check_reduce(fn, axes, transposed, 11);
}

TEST(Reduce, AmaxSplitsTiesEvenly) {
  ReduceGeom g;
  g.rank = 1;
  g.shape[0] = 4;
  g.stride[0] = 1;
  g.reduced[0] = true;
  g.fn = pw::ReduceFn::Amax;
  const float x[] = {2, 5, 5, 1};
  float y = 0;
  reduce_fwd(g, x, &y);
  EXPECT_EQ(y, 5.0f);
  const float dy = 3;
  float dx[4];
  reduce_bwd(g, x, &y, &dy, dx, false);
  EXPECT_EQ(std::vector<float>(dx, dx + 4), (std::vector<float>{0, 1.5f, 1.5f, 0}));
}

}  // namespace
}  // namespace remat::cpu
