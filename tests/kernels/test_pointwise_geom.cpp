// coalesced(PwGeom) (pointwise_geom.cpp), which the CUDA launchers apply
// before they launch: the merged geometry for the shapes the models give
// (an elementwise op over a rank-4 tensor, a norm's weight and its
// statistics broadcast), and on random geometries (broadcast, transposed,
// expanded operands, a strided output) the CPU kernels' results on the
// merged geometry equal theirs on the original bit for bit, forward and every
// operand's gradient (their summation order is the same).
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

// Output shape `shape`; operand k's dims (1 where it broadcasts), stored row-major.
PwGeom row_major(pw::Fn fn, const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& dims) {
  PwGeom g;
  g.rank = static_cast<int>(shape.size());
  g.fn = fn;
  g.arity = static_cast<int>(dims.size());
  for (int d = 0; d < g.rank; ++d) g.shape[d] = shape[static_cast<std::size_t>(d)];
  for (int k = 0; k < g.arity; ++k) {
    int64_t at = 1;
    for (int d = g.rank; d-- > 0;) {
      const int64_t n = dims[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
      g.dims[k][d] = n;
      g.stride[k][d] = n == 1 ? 0 : at;
      at *= n;
    }
  }
  return g;
}

std::vector<int64_t> shape_of(const PwGeom& g) { return {g.shape, g.shape + g.rank}; }
std::vector<int64_t> dims_of(const PwGeom& g, int k) { return {g.dims[k], g.dims[k] + g.rank}; }
std::vector<int64_t> strides_of(const PwGeom& g, int k) { return {g.stride[k], g.stride[k] + g.rank}; }

TEST(PwCoalesce, TheModelsShapesMergeToOneOrTwoDimensions) {
  // x * y over (4, 16, 1024, 64): one run.
  const PwGeom same = coalesced(row_major(pw::Fn::Mul, {4, 16, 1024, 64}, {{4, 16, 1024, 64}, {4, 16, 1024, 64}}));
  EXPECT_EQ(shape_of(same), (std::vector<int64_t>{4 * 16 * 1024 * 64}));
  EXPECT_EQ(strides_of(same, 1), (std::vector<int64_t>{1}));
  // RMSNorm: x (4, 1024, 1024) * weight (1024) and * rsqrt (4, 1024, 1).
  const PwGeom w = coalesced(row_major(pw::Fn::Mul, {4, 1024, 1024}, {{4, 1024, 1024}, {1, 1, 1024}}));
  EXPECT_EQ(shape_of(w), (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(dims_of(w, 1), (std::vector<int64_t>{1, 1024}));
  EXPECT_EQ(strides_of(w, 1), (std::vector<int64_t>{0, 1}));
  const PwGeom r = coalesced(row_major(pw::Fn::Mul, {4, 1024, 1024}, {{4, 1024, 1024}, {4, 1024, 1}}));
  EXPECT_EQ(shape_of(r), (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(dims_of(r, 1), (std::vector<int64_t>{4096, 1}));
  EXPECT_EQ(strides_of(r, 0), (std::vector<int64_t>{1024, 1}));
  // A batch norm's per-channel scale over NCHW keeps three.
  const PwGeom c = coalesced(row_major(pw::Fn::Mul, {8, 64, 7, 7}, {{8, 64, 7, 7}, {1, 64, 1, 1}}));
  EXPECT_EQ(shape_of(c), (std::vector<int64_t>{8, 64, 49}));
  // A scalar stays a scalar; sizes 1 go.
  EXPECT_EQ(coalesced(row_major(pw::Fn::Neg, {1, 1}, {{1, 1}})).rank, 0);
  EXPECT_EQ(coalesced(row_major(pw::Fn::Neg, {1, 5, 1}, {{1, 5, 1}})).rank, 1);
}

TEST(PwCoalesce, AnOperandKeptThroughStrideZeroIsNotMergedWithABroadcastOne) {
  // Operand 0 is an expanded view: it reads one element along dimension 1 but
  // has all 3 of them (its gradient is 2x3); dimension 0 is kept by both. Operand 0
  // keeps dimension 1 with stride 0, so it must not merge with its neighbour
  // where it broadcasts.
  PwGeom g = row_major(pw::Fn::Add, {2, 3, 4}, {{2, 3, 1}, {2, 3, 4}});
  g.stride[0][1] = 0;  // expanded along 1
  g.stride[0][0] = 1;
  const PwGeom c = coalesced(g);
  EXPECT_EQ(c.rank, 3);
}

// Random values, and a layout: operand k stored with its dims permuted, read
// through the matching strides; sometimes a kept dimension read through stride
// 0 (an expanded view); the forward's output sometimes strided (a Concat's slice).
struct Random {
  std::mt19937 rng;
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
};

PwGeom random_geom(Random& r, pw::Fn fn, int arity) {
  PwGeom g;
  g.rank = static_cast<int>(r.pick(0, 5));
  g.fn = fn;
  g.arity = arity;
  for (int d = 0; d < g.rank; ++d) g.shape[d] = r.pick(1, 4);
  for (int k = 0; k < arity; ++k) {
    std::vector<int> order(static_cast<std::size_t>(g.rank));
    for (int d = 0; d < g.rank; ++d) {
      g.dims[k][d] = r.pick(0, 2) == 0 ? 1 : g.shape[d];
      order[static_cast<std::size_t>(d)] = d;
    }
    if (r.pick(0, 2) == 0) std::shuffle(order.begin(), order.end(), r.rng);
    int64_t at = 1;
    for (int i = g.rank; i-- > 0;) {
      const int d = order[static_cast<std::size_t>(i)];
      g.stride[k][d] = g.dims[k][d] == 1 ? 0 : at;
      at *= g.dims[k][d];
    }
    for (int d = 0; d < g.rank; ++d)
      if (g.dims[k][d] != 1 && r.pick(0, 6) == 0) g.stride[k][d] = 0;  // expanded view
  }
  if (r.pick(0, 3) == 0) {  // the output in a wider buffer: every row padded by 1
    g.out_strided = true;
    int64_t at = 1;
    for (int d = g.rank; d-- > 0;) g.out_stride[d] = at, at *= g.shape[d] + (d == g.rank - 1 ? 1 : 0);
  }
  return g;
}

int64_t own_numel(const PwGeom& g, int k) {
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) n *= g.dims[k][d];
  return n;
}
// Elements the forward's output spans (row-major, or through its strides).
int64_t out_extent(const PwGeom& g) {
  if (!g.out_strided) return g.numel();
  int64_t last = 0;
  for (int d = 0; d < g.rank; ++d) last += (g.shape[d] - 1) * g.out_stride[d];
  return last + 1;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PwCoalesce, KernelsGiveTheSameBitsOnTheMergedGeometry) {
  Random r{std::mt19937(20261128)};
  int merged = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const pw::Fn fn = trial % 3 == 0 ? pw::Fn::Where : trial % 3 == 1 ? pw::Fn::Mul : pw::Fn::Div;
    const int arity = pw::kFns[static_cast<int>(fn)].arity;
    const PwGeom g = random_geom(r, fn, arity);
    const PwGeom c = coalesced(g);
    merged += c.rank < g.rank;
    std::vector<std::vector<float>> xs;
    const float* x[3] = {};
    for (int k = 0; k < arity; ++k) {
      std::vector<float> v(static_cast<std::size_t>(own_numel(g, k)));
      for (float& e : v) e = static_cast<float>(r.pick(1, 1000)) / 97.0f * (r.pick(0, 1) ? 1.0f : -1.0f);
      if (fn == pw::Fn::Where && k == 0)
        for (float& e : v) e = e > 0 ? 1.0f : 0.0f;
      xs.push_back(std::move(v));
    }
    for (int k = 0; k < arity; ++k) x[k] = xs[static_cast<std::size_t>(k)].data();
    const std::string what = "trial " + std::to_string(trial) + " rank " + std::to_string(g.rank) + " -> " +
                             std::to_string(c.rank);
    std::vector<float> y0(static_cast<std::size_t>(out_extent(g)), 0.5f), y1 = y0;
    pointwise_fwd(g, x, y0.data());
    pointwise_fwd(c, x, y1.data());
    ASSERT_TRUE(same_bits(y0, y1)) << what << " forward";
    if (g.out_strided) continue;  // the backward reads dy row-major
    std::vector<float> dy(y0.size());
    for (float& e : dy) e = static_cast<float>(r.pick(-500, 500)) / 31.0f;
    for (int k = 0; k < arity; ++k) {
      for (const bool acc : {false, true}) {
        std::vector<float> d0(static_cast<std::size_t>(own_numel(g, k)), 0.25f), d1 = d0;
        pointwise_bwd(g, k, x, y0.data(), dy.data(), d0.data(), acc);
        pointwise_bwd(c, k, x, y0.data(), dy.data(), d1.data(), acc);
        ASSERT_TRUE(same_bits(d0, d1)) << what << " d/d operand " << k << (acc ? " accumulate" : "");
      }
    }
  }
  EXPECT_GT(merged, 100);  // the random layouts do merge, often
}

}  // namespace
}  // namespace remat::cpu
