// The tensor-core GEMMs of mixed precision (gpu/kernels/gemm_lowp.cu and
// linear.cu's *_lowp) against a float64 reference of the same 16-bit values.
//
// The bound. The products of two bf16 or two f16 values are exact in f32
// (8+8 and 11+11 significant bits), so the whole error is the summation's.
// Tensor cores add a block of b products (b ≤ 16) and the running sum at
// once: every term is aligned to the largest one, 2^E, and truncated to 24
// bits there (an error under 2^(E-23) each), and the block's sum is truncated
// once more (round toward zero: unit roundoff 2^-23, not f32's 2^-24 to
// nearest). A block therefore errs by at most (b+2)·2^-23·S, S the sum of
// the absolute values entering it, which is at most Σ|a_i·b_i| (+|c| when
// beta is 1) up to second order; ⌈k/b⌉ blocks give (k/b+1)(b+2) ≤ 3k+b+2 ≤
// 3k+18 such terms. A split-K reduction adds partial sums in f32, at most k
// of them, inside the same count. So, with n = 3·k + 18 and u = 2^-23,
//   |c - exact| ≤ γ_n · (Σ_i |a_i·b_i| + |c_old|),  γ_n = n·u / (1 - n·u),
// c_old counting as a term when beta is 1 (k+1 terms then). A swapped
// transpose, a wrong stride or the other 16-bit format errs by O(1) of the
// sum, far beyond it; a single product (k = 1) is exact.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/convert.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/lowp_test_util.h"

namespace remat::gpu_testing {
namespace {

using gpu::HalfType;
struct Shape {
  int64_t batch, m, n, k;
};

// Row-major op(a)·op(b) (+ c_old) in double, with Σ|terms| beside it.
struct Exact {
  std::vector<double> sum, abs;
};
Exact reference(HalfType t, const Codes& a, const Codes& b, const Vec* c_old, const Shape& s, bool ta, bool tb,
                int64_t sa, int64_t sb, int64_t sc) {
  Exact e{std::vector<double>(static_cast<size_t>(s.batch * s.m * s.n)),
          std::vector<double>(static_cast<size_t>(s.batch * s.m * s.n))};
  for (int64_t q = 0; q < s.batch; ++q)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0, abs = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          const double x = value_of(t, a[static_cast<size_t>(q * sa + (ta ? p * s.m + i : i * s.k + p))]);
          const double y = value_of(t, b[static_cast<size_t>(q * sb + (tb ? j * s.k + p : p * s.n + j))]);
          sum += x * y;
          abs += std::fabs(x * y);
        }
        if (c_old) {
          const double c = (*c_old)[static_cast<size_t>(q * sc + i * s.n + j)];
          sum += c;
          abs += std::fabs(c);
        }
        e.sum[static_cast<size_t>((q * s.m + i) * s.n + j)] = sum;
        e.abs[static_cast<size_t>((q * s.m + i) * s.n + j)] = abs;
      }
  return e;
}

// got (batch, m, n) at batch stride sc, against the reference within the bound.
void expect_within(const Vec& got, const Exact& e, const Shape& s, int64_t sc, int64_t terms, const std::string& what) {
  const double g = gamma_bound(terms);
  size_t bad = 0;
  std::string first;
  for (int64_t q = 0; q < s.batch; ++q)
    for (int64_t r = 0; r < s.m * s.n; ++r) {
      const auto i = static_cast<size_t>(q * s.m * s.n + r);
      const double c = got[static_cast<size_t>(q * sc + r)];
      if (!(std::fabs(c - e.sum[i]) <= g * e.abs[i])) {
        if (bad++ == 0)
          first = "batch " + std::to_string(q) + " element " + std::to_string(r) + ": " + std::to_string(c) +
                  " vs " + std::to_string(e.sum[i]) + " (bound " + std::to_string(g * e.abs[i]) + ")";
      }
    }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " outside the bound; first " << first;
}

class GemmLowp : public GpuKernels {
 protected:
  // One strided-batched call on fresh buffers, checked against the bound;
  // with `accumulate`, c starts random and beta is 1, else c starts NaN
  // (beta 0 must not read it). Returns c.
  Vec check(HalfType t, const Shape& s, bool ta, bool tb, bool accumulate, uint32_t seed, int64_t sa = -1,
            int64_t sb = -1) {
    const int64_t stride_a = sa < 0 ? s.m * s.k : sa, stride_b = sb < 0 ? s.k * s.n : sb, stride_c = s.m * s.n;
    const auto span = [&](int64_t stride, int64_t size) { return static_cast<size_t>(std::max<int64_t>(stride * (s.batch - 1) + size, 1)); };
    const Codes a = random_codes(t, span(stride_a, s.m * s.k), seed);
    const Codes b = random_codes(t, span(stride_b, s.k * s.n), seed + 1);
    const Vec c0 = accumulate ? random_vec(static_cast<size_t>(s.batch * s.m * s.n), seed + 2)
                              : nan_vec(static_cast<size_t>(s.batch * s.m * s.n));
    DeviceArray<uint16_t> da(a), db(b);
    Dev dc(c0);
    gpu::gemm_lowp(t, da.get(), db.get(), dc.get(), s.batch, s.m, s.n, s.k, ta, tb, accumulate ? 1.0f : 0.0f,
                   cublas_, stream_, sa, sb);
    const Vec c = dc.fetch();
    const Exact e = reference(t, a, b, accumulate ? &c0 : nullptr, s, ta, tb, stride_a, stride_b, stride_c);
    const std::string what = std::string(t == HalfType::BF16 ? "bf16" : "f16") + " batch " +
                             std::to_string(s.batch) + " m " + std::to_string(s.m) + " n " + std::to_string(s.n) +
                             " k " + std::to_string(s.k) + (ta ? " aT" : "") + (tb ? " bT" : "") +
                             (accumulate ? " +c" : "");
    expect_within(c, e, s, stride_c, s.k + (accumulate ? 1 : 0), what);
    return c;
  }
};

constexpr HalfType kTypes[] = {HalfType::BF16, HalfType::F16};

// Every transpose combination, single and batched, sizes not multiples of 8
// (tensor-core tiles) and a long sum, overwritten and accumulated.
TEST_F(GemmLowp, AllTransposesWithinTheBound) {
  const Shape shapes[] = {{1, 1, 1, 1}, {1, 7, 13, 1}, {1, 33, 17, 65}, {1, 64, 48, 256},
                          {3, 5, 3, 1000}, {2, 31, 9, 40}, {4, 16, 24, 8}};
  uint32_t seed = 1;
  for (const HalfType t : kTypes)
    for (const Shape& s : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const bool acc : {false, true}) check(t, s, ta, tb, acc, seed += 7);
}

// A single product of two 16-bit values is exact in f32: no rounding at all.
TEST_F(GemmLowp, SingleProductIsExact) {
  for (const HalfType t : kTypes) {
    const Shape s{2, 9, 11, 1};
    const Codes a = random_codes(t, 18, 5), b = random_codes(t, 22, 6);
    DeviceArray<uint16_t> da(a), db(b);
    Dev dc(nan_vec(2 * 9 * 11));
    gpu::gemm_lowp(t, da.get(), db.get(), dc.get(), s.batch, s.m, s.n, s.k, false, false, 0.0f, cublas_, stream_);
    const Vec c = dc.fetch();
    for (int64_t q = 0; q < 2; ++q)
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t j = 0; j < 11; ++j) {
          const double want = value_of(t, a[static_cast<size_t>(q * 9 + i)]) * value_of(t, b[static_cast<size_t>(q * 11 + j)]);
          ASSERT_EQ(static_cast<double>(c[static_cast<size_t>((q * 9 + i) * 11 + j)]), want) << q << " " << i << " " << j;
        }
  }
}

// k = 0: zeros with beta 0 (c is not read: NaN before), c untouched with beta 1.
TEST_F(GemmLowp, EmptySumWritesZerosOrKeepsC) {
  for (const HalfType t : kTypes) {
    Dev zeroed(nan_vec(2 * 3 * 5));
    gpu::gemm_lowp(t, nullptr, nullptr, zeroed.get(), 2, 3, 5, 0, false, false, 0.0f, cublas_, stream_);
    expect_bitwise(zeroed.fetch(), Vec(30, 0.0f), "k = 0, beta 0");
    const Vec c0 = random_vec(30, 9);
    Dev kept(c0);
    gpu::gemm_lowp(t, nullptr, nullptr, kept.get(), 2, 3, 5, 0, false, false, 1.0f, cublas_, stream_);
    expect_bitwise(kept.fetch(), c0, "k = 0, beta 1");
  }
}

// A broadcast operand (batch stride 0), as a MatMul's gemm_runs pass one.
TEST_F(GemmLowp, BroadcastOperand) {
  for (const HalfType t : kTypes) {
    check(t, {3, 12, 10, 20}, false, false, false, 31, -1, 0);
    check(t, {3, 12, 10, 20}, false, true, true, 32, 0, -1);
  }
}

// The same call twice, and again on copies of the operands in other
// buffers: the same bits (one handle, one stream, no atomics).
TEST_F(GemmLowp, RerunsBitForBit) {
  for (const HalfType t : kTypes)
    for (const bool ta : {false, true}) {
      const Shape s{2, 96, 80, 768};
      const Codes a = random_codes(t, static_cast<size_t>(2 * 96 * 768), 41);
      const Codes b = random_codes(t, static_cast<size_t>(2 * 768 * 80), 42);
      DeviceArray<uint16_t> a1(a), b1(b), a2(a), b2(b);
      Dev c1(nan_vec(2 * 96 * 80)), c2(nan_vec(2 * 96 * 80)), c3(nan_vec(2 * 96 * 80));
      gpu::gemm_lowp(t, a1.get(), b1.get(), c1.get(), s.batch, s.m, s.n, s.k, ta, true, 0.0f, cublas_, stream_);
      gpu::gemm_lowp(t, a1.get(), b1.get(), c2.get(), s.batch, s.m, s.n, s.k, ta, true, 0.0f, cublas_, stream_);
      gpu::gemm_lowp(t, a2.get(), b2.get(), c3.get(), s.batch, s.m, s.n, s.k, ta, true, 0.0f, cublas_, stream_);
      const Vec r1 = c1.fetch();
      expect_bitwise(r1, c2.fetch(), "rerun");
      expect_bitwise(r1, c3.fetch(), "other buffers");
    }
}

// linear_fwd_lowp / linear_bwd_lowp: y = act(x·Wᵀ + b), dx = dy·W (overwritten
// or added), dW += dyᵀ·x, each within the bound of its exact value; db is the
// f32 path's column sum of the same dy, bit for bit.
TEST_F(GemmLowp, LinearForwardAndBackward) {
  for (const HalfType t : kTypes) {
    const int64_t rows = 37, in = 50, out = 19;
    const Codes x = random_codes(t, rows * in, 51), W = random_codes(t, out * in, 52), dy = random_codes(t, rows * out, 53);
    Vec dy32(dy.size());
    for (size_t i = 0; i < dy.size(); ++i) dy32[i] = static_cast<float>(value_of(t, dy[i]));
    const Vec b = random_vec(out, 54);
    DeviceArray<uint16_t> dx16(x), dW16(W), ddy16(dy);
    Dev db_bias(b), ddy(dy32), y(nan_vec(rows * out));
    gpu::linear_fwd_lowp(t, Act::None, dx16.get(), dW16.get(), db_bias.get(), y.get(), rows, in, out, cublas_, stream_);
    // y = x·Wᵀ + b: the bias as c_old (one more term).
    Vec bias_rows(rows * out);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) bias_rows[static_cast<size_t>(r * out + o)] = b[static_cast<size_t>(o)];
    const Shape fs{1, rows, out, in};
    expect_within(y.fetch(), reference(t, x, W, &bias_rows, fs, false, true, 0, 0, 0), fs, 0, in + 1, "linear y");

    for (const bool acc : {false, true}) {
      const Vec dx0 = acc ? random_vec(rows * in, 55) : nan_vec(rows * in);
      const Vec dW0 = random_vec(out * in, 56);
      Dev ddx(dx0), ddW(dW0), ddb(Vec(out, 0.0f)), ref_db(Vec(out, 0.0f)), ref_dx(nan_vec(rows * in)),
          ref_dW(Vec(out * in, 0.0f)), x32(Vec(rows * in, 0.0f)), W32(Vec(out * in, 0.0f));
      gpu::linear_bwd_lowp(t, dx16.get(), dW16.get(), ddy16.get(), ddy.get(), ddx.get(), ddW.get(), ddb.get(), rows,
                           in, out, acc, cublas_, stream_);
      const Shape xs{1, rows, in, out}, ws{1, out, in, rows};
      expect_within(ddx.fetch(), reference(t, dy, W, acc ? &dx0 : nullptr, xs, false, false, 0, 0, 0), xs, 0,
                    out + (acc ? 1 : 0), acc ? "linear dx +=" : "linear dx");
      expect_within(ddW.fetch(), reference(t, dy, x, &dW0, ws, true, false, 0, 0, 0), ws, 0, rows + 1, "linear dW");
      // The f32 path's bias gradient from the same dy.
      gpu::linear_bwd(x32.get(), W32.get(), ddy.get(), ref_dx.get(), ref_dW.get(), ref_db.get(), rows, in, out, false,
                      cublas_, stream_);
      expect_bitwise(ddb.fetch(), ref_db.fetch(), "linear db");
    }
  }
}

// Dense's fused activation after the 16-bit product: relu(x·Wᵀ + b) is the
// f32 epilogue of linear_fwd_lowp's own y.
TEST_F(GemmLowp, DenseEpilogue) {
  const HalfType t = HalfType::BF16;
  const int64_t rows = 9, in = 24, out = 10;
  const Codes x = random_codes(t, rows * in, 61), W = random_codes(t, out * in, 62);
  const Vec b = random_vec(out, 63);
  DeviceArray<uint16_t> dx(x), dW(W);
  Dev db(b), lin(nan_vec(rows * out)), relu(nan_vec(rows * out));
  gpu::linear_fwd_lowp(t, Act::None, dx.get(), dW.get(), db.get(), lin.get(), rows, in, out, cublas_, stream_);
  gpu::linear_fwd_lowp(t, Act::ReLU, dx.get(), dW.get(), db.get(), relu.get(), rows, in, out, cublas_, stream_);
  Vec want = lin.fetch();
  for (float& v : want) v = v > 0.0f ? v : 0.0f;
  expect_bitwise(relu.fetch(), want, "relu epilogue");
  EXPECT_THROW(gpu::linear_fwd_lowp(t, Act::GELU, dx.get(), dW.get(), db.get(), lin.get(), rows, in, out, cublas_, stream_),
               std::invalid_argument);
}

}  // namespace
}  // namespace remat::gpu_testing
