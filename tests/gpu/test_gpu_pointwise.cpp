// The CUDA pointwise family and reductions against the CPU kernels: every
// function of pointwise_fns.h on a strided (transposed) operand and broadcast
// ones, each operand's gradient (a broadcast one summed on both in the same
// order, in double), and accumulate; sum, mean and amax over several axes of a
// strided input; top-k's indices and gather (with an expanded index), and
// cumsum, bit for bit. Without a usable device each test skips with the reason.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace {

using namespace remat::gpu_testing;  // NOLINT: the fixture and helpers of every GPU kernel test
namespace pw = remat::pw;

// Output (2, 3, 4); operand k's dims (1 where it broadcasts); operand 0 read
// through transposed strides when `transposed`.
cpu::PwGeom geom(pw::Fn fn, const std::vector<std::vector<int64_t>>& dims, bool transposed) {
  cpu::PwGeom g;
  g.rank = 3;
  g.fn = fn;
  g.arity = pw::kFns[static_cast<int>(fn)].arity;
  pw::attr_defaults(fn, g.p, g.q);
  if (fn == pw::Fn::Clamp) g.p = -0.5f, g.q = 0.8f;
  if (fn == pw::Fn::LeakyReLU) g.p = 0.2f;
  const int64_t shape[3] = {2, 3, 4};
  for (int d = 0; d < 3; ++d) g.shape[d] = shape[d];
  for (int k = 0; k < g.arity; ++k) {
    const auto& n = dims[static_cast<std::size_t>(k)];
    const bool t = k == 0 && transposed;
    const int64_t st[3] = {t ? 1 : n[1] * n[2], t ? n[0] : n[2], t ? n[0] * n[1] : 1};
    for (int d = 0; d < 3; ++d) {
      g.dims[k][d] = n[static_cast<std::size_t>(d)];
      g.stride[k][d] = n[static_cast<std::size_t>(d)] == 1 ? 0 : st[d];
    }
  }
  return g;
}

TEST_F(GpuKernels, EveryPointwiseFunctionMatchesTheCpuStridedAndBroadcast) {
  for (int f = 0; f < pw::kFnCount; ++f) {
    const auto fn = static_cast<pw::Fn>(f);
    const std::string name = pw::kFns[f].name;
    for (const bool first_broadcast : {false, true}) {
      if (first_broadcast && pw::kFns[f].arity == 1) continue;
      const std::vector<std::vector<int64_t>> dims =
          first_broadcast ? std::vector<std::vector<int64_t>>{{1, 3, 1}, {2, 3, 4}, {2, 1, 4}}
                          : std::vector<std::vector<int64_t>>{{2, 3, 4}, {1, 3, 1}, {1, 1, 4}};
      const cpu::PwGeom g = geom(fn, dims, !first_broadcast);
      std::vector<Vec> xs;
      for (int k = 0; k < g.arity; ++k) {
        const auto& n = dims[static_cast<std::size_t>(k)];
        // Positive: log, sqrt, rsqrt, reciprocal, pow's base, a divisor.
        xs.push_back(random_vec(static_cast<size_t>(n[0] * n[1] * n[2]), 40u + static_cast<uint32_t>(f * 3 + k), 0.3f, 2.0f));
        if (fn == pw::Fn::Where && k == 0)
          for (float& v : xs.back()) v = v > 1.1f ? 1.0f : 0.0f;
      }
      std::deque<Dev> xd;  // not movable: constructed in place
      for (const Vec& x : xs) xd.emplace_back(x);
      const float* hx[3] = {};
      const float* dx_[3] = {};
      for (int k = 0; k < g.arity; ++k) hx[k] = xs[static_cast<std::size_t>(k)].data(), dx_[k] = xd[static_cast<std::size_t>(k)].get();
      Vec y(24);
      cpu::pointwise_fwd(g, hx, y.data());
      Dev yd(nan_vec(24));
      gpu::pointwise_fwd(g, dx_, yd.get(), stream_);
      expect_close(yd.fetch(), y, kTol, name + " forward");
      const Vec dy = random_vec(24, 7);
      const Dev dyd(dy);
      for (int k = pw::Fn::Where == fn ? 1 : 0; k < g.arity; ++k) {
        const size_t n = xs[static_cast<std::size_t>(k)].size();
        for (const bool acc : {false, true}) {
          Vec want = random_vec(n, 9);
          Dev got(want);
          cpu::pointwise_bwd(g, k, hx, y.data(), dy.data(), want.data(), acc);
          gpu::pointwise_bwd(g, k, dx_, yd.get(), dyd.get(), got.get(), acc, stream_);
          expect_close(got.fetch(), want, kTol, name + " d/d operand " + std::to_string(k) + (acc ? " accumulate" : ""));
        }
      }
    }
  }
}

// Gradients that sum many terms an element go to a column of threads (a
// norm's weight, (96) over (6, 40, 96)) or a warp (its statistics, (6, 40, 1);
// and (1, 40, 1), whose terms span two dimensions); and an Expand of a
// contiguous input takes the same path as Cast's gradient. Each within the
// tolerance of the CPU's row-major double sums, and a second run gives the
// same bits.
TEST_F(GpuKernels, ManyTermGradientsMatchTheCpuAndRepeatBitwise) {
  const int64_t shape[3] = {6, 40, 96};
  const int64_t n_out = shape[0] * shape[1] * shape[2];
  for (const auto& wdims : {std::vector<int64_t>{1, 1, 96}, std::vector<int64_t>{6, 40, 1},
                            std::vector<int64_t>{1, 40, 1}}) {
    for (const auto fn : {pw::Fn::Mul, pw::Fn::Cast}) {
      cpu::PwGeom g;
      g.rank = 3;
      g.fn = fn;
      g.arity = fn == pw::Fn::Cast ? 1 : 2;
      const std::vector<std::vector<int64_t>> dims =
          fn == pw::Fn::Cast ? std::vector<std::vector<int64_t>>{wdims}
                             : std::vector<std::vector<int64_t>>{{6, 40, 96}, wdims};
      std::vector<Vec> xs;
      for (int k = 0; k < g.arity; ++k) {
        const auto& n = dims[static_cast<std::size_t>(k)];
        int64_t at = 1;
        for (int d = 3; d-- > 0;) {
          g.shape[d] = shape[d];
          g.dims[k][d] = n[static_cast<std::size_t>(d)];
          g.stride[k][d] = n[static_cast<std::size_t>(d)] == 1 ? 0 : at;
          at *= n[static_cast<std::size_t>(d)];
        }
        xs.push_back(random_vec(static_cast<size_t>(at), 60u + static_cast<uint32_t>(k)));
      }
      std::deque<Dev> xd;
      for (const Vec& x : xs) xd.emplace_back(x);
      const float* hx[3] = {};
      const float* dx_[3] = {};
      for (int k = 0; k < g.arity; ++k) hx[k] = xs[static_cast<std::size_t>(k)].data(), dx_[k] = xd[static_cast<std::size_t>(k)].get();
      Vec y(static_cast<size_t>(n_out));
      cpu::pointwise_fwd(g, hx, y.data());
      Dev yd(nan_vec(y.size()));
      gpu::pointwise_fwd(g, dx_, yd.get(), stream_);
      const std::string what = std::string(pw::kFns[static_cast<int>(fn)].name) + " operand dims (" +
                               std::to_string(wdims[0]) + ", " + std::to_string(wdims[1]) + ", " +
                               std::to_string(wdims[2]) + ")";
      expect_close(yd.fetch(), y, kTol, what + " forward");
      const Vec dy = random_vec(y.size(), 8);
      const Dev dyd(dy);
      for (int k = 0; k < g.arity; ++k) {
        const size_t n = xs[static_cast<std::size_t>(k)].size();
        for (const bool acc : {false, true}) {
          Vec want = random_vec(n, 10);
          Dev got(want), again(want);
          cpu::pointwise_bwd(g, k, hx, y.data(), dy.data(), want.data(), acc);
          gpu::pointwise_bwd(g, k, dx_, yd.get(), dyd.get(), got.get(), acc, stream_);
          gpu::pointwise_bwd(g, k, dx_, yd.get(), dyd.get(), again.get(), acc, stream_);
          const std::string grad = what + " d/d operand " + std::to_string(k) + (acc ? " accumulate" : "");
          expect_close(got.fetch(), want, kTol, grad);
          expect_bitwise(again.fetch(), got.fetch(), grad + ", run twice");
        }
      }
    }
  }
}

TEST_F(GpuKernels, ReductionsMatchTheCpuOverAxesOfAStridedInput) {
  const Vec x = random_vec(24, 5);
  const Dev xd(x);
  for (const auto fn : {pw::ReduceFn::Sum, pw::ReduceFn::Mean, pw::ReduceFn::Amax}) {
    for (const auto& axes : {std::vector<bool>{false, false, true}, std::vector<bool>{true, false, true},
                             std::vector<bool>{true, true, true}}) {
      cpu::ReduceGeom g;
      g.rank = 3;
      g.fn = fn;
      const int64_t shape[3] = {2, 3, 4}, st[3] = {1, 2, 6};  // stored transposed
      int64_t out = 1;
      for (int d = 0; d < 3; ++d) {
        g.shape[d] = shape[d], g.stride[d] = st[d], g.reduced[d] = axes[static_cast<std::size_t>(d)];
        out *= g.reduced[d] ? 1 : shape[d];
      }
      const std::string what = pw::kReduceNames[static_cast<int>(fn)];
      Vec y(static_cast<size_t>(out));
      cpu::reduce_fwd(g, x.data(), y.data());
      Dev yd(nan_vec(y.size()));
      gpu::reduce_fwd(g, xd.get(), yd.get(), stream_);
      expect_close(yd.fetch(), y, kTol, what + " forward");
      const Vec dy = random_vec(y.size(), 3);
      const Dev dyd(dy);
      Vec want(24);
      cpu::reduce_bwd(g, x.data(), y.data(), dy.data(), want.data(), false);
      Dev got(nan_vec(24));
      gpu::reduce_bwd(g, xd.get(), yd.get(), dyd.get(), got.get(), false, stream_);
      expect_close(got.fetch(), want, kTol, what + " backward");
    }
  }
}

// A MoE router's picks: top 2 of 5 along the last axis of (6, 5) logits read
// transposed (with a tie), then (6, 5, 3) expert outputs gathered along axis 1
// by those indices expanded over the last axis (stride 0). The same indices,
// values and gradients (overwrite, then accumulate) as the CPU's, bit for bit.
TEST_F(GpuKernels, TopKAndGatherMatchTheCpuBitForBit) {
  Vec logits = random_vec(30, 91);
  logits[7] = logits[12];  // stored (5, 6): a tie in one row
  cpu::TopKGeom t;
  t.rank = 2, t.axis = 1, t.k = 2;
  t.shape[0] = 6, t.shape[1] = 5;
  t.stride[0] = 1, t.stride[1] = 6;
  std::vector<int64_t> want_idx(12, -1);
  cpu::topk_fwd(t, logits.data(), want_idx.data());
  const Dev ld(logits);
  const DeviceArray<int64_t> idx_d(std::vector<int64_t>(12, -1));
  gpu::topk_fwd(t, ld.get(), idx_d.get(), stream_);
  EXPECT_EQ(idx_d.fetch(), want_idx);

  cpu::GatherGeom g;
  g.rank = 3, g.axis = 1;
  const int64_t shape[3] = {6, 2, 3}, xs[3] = {6, 5, 3};
  for (int d = 0; d < 3; ++d) g.shape[d] = shape[d], g.x_shape[d] = xs[d];
  g.i_stride[0] = 2, g.i_stride[1] = 1, g.i_stride[2] = 0;
  g.x_stride[0] = 15, g.x_stride[1] = 3, g.x_stride[2] = 1;
  const Vec x = random_vec(90, 92);
  const Dev xd(x);
  Vec y(36);
  cpu::gather_fwd(g, x.data(), want_idx.data(), y.data());
  const Dev yd(nan_vec(36));
  gpu::gather_fwd(g, xd.get(), idx_d.get(), yd.get(), stream_);
  expect_bitwise(yd.fetch(), y, "gather forward");
  const Vec dy = random_vec(36, 93);
  const Dev dyd(dy);
  for (const bool accumulate : {false, true}) {
    const Vec start = accumulate ? random_vec(90, 94) : nan_vec(90);
    Vec want = accumulate ? start : Vec(90, 0.0f);
    cpu::gather_bwd(g, want_idx.data(), dy.data(), want.data(), accumulate);
    const Dev got(start);
    gpu::gather_bwd(g, idx_d.get(), dyd.get(), got.get(), accumulate, stream_);
    expect_bitwise(got.fetch(), want, accumulate ? "gather backward, accumulate" : "gather backward");
  }
}

// torch.cumsum along the middle axis of (3, 7, 4) and the last of (5, 9): the
// same running sums (double, per line) and reversed sums of dy as the CPU's,
// overwriting and accumulating, bit for bit.
TEST_F(GpuKernels, CumsumMatchesTheCpuBitForBit) {
  for (const cpu::ScanGeom g : {cpu::ScanGeom{3, 7, 4}, cpu::ScanGeom{5, 9, 1}}) {
    const auto n = static_cast<std::size_t>(g.outer * g.len * g.inner);
    const Vec x = random_vec(n, 95), dy = random_vec(n, 96);
    Vec y(n);
    cpu::cumsum_fwd(g, x.data(), y.data());
    const Dev xd(x), yd(nan_vec(n)), dyd(dy);
    gpu::cumsum_fwd(g, xd.get(), yd.get(), stream_);
    expect_bitwise(yd.fetch(), y, "cumsum forward");
    for (const bool accumulate : {false, true}) {
      const Vec start = accumulate ? random_vec(n, 97) : nan_vec(n);
      Vec want = start;
      cpu::cumsum_bwd(g, dy.data(), want.data(), accumulate);
      const Dev got(start);
      gpu::cumsum_bwd(g, dyd.get(), got.get(), accumulate, stream_);
      expect_bitwise(got.fetch(), want, accumulate ? "cumsum backward, accumulate" : "cumsum backward");
    }
  }
}

}  // namespace
