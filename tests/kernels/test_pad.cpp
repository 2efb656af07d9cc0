// The Pad kernels against a replica written the way PyTorch's CPU kernels
// compute (aten's PaddingKernel.cpp and constant_pad_nd, re-derived, not
// copied): each dimension's source list built out by hand (the mirrored,
// repeated or wrapped coordinates, the fill), the forward as a gather over it,
// the backward as PyTorch's scatter — each output's gradient added into a
// zeroed float32 grad_input in row-major output order (reflect, replicate), a
// slice for a constant pad (a -0.0 stays -0.0), circular's copies into the
// buffer undone in reverse as CopySlices does — which the kernel's gather
// must equal bit for bit. Every mode on 1, 2 and 3 padded dimensions, pads as wide as
// each mode allows, cropping, padding of the channels, accumulation.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::garbage;
using test::random_floats;

// Per output coordinate of one dimension, the input coordinate it copies
// (-1: the fill), listed out as the pad looks.
std::vector<int64_t> sources(PadMode mode, int64_t in, int64_t b, int64_t e) {
  std::vector<int64_t> s;
  switch (mode) {
    case PadMode::Constant:
      for (int64_t k = 0; k < b; ++k) s.push_back(-1);
      for (int64_t i = b < 0 ? -b : 0; i < in - (e < 0 ? -e : 0); ++i) s.push_back(i);
      for (int64_t k = 0; k < e; ++k) s.push_back(-1);
      break;
    case PadMode::Reflect:
      for (int64_t k = b; k >= 1; --k) s.push_back(k);
      for (int64_t i = 0; i < in; ++i) s.push_back(i);
      for (int64_t k = 1; k <= e; ++k) s.push_back(in - 1 - k);
      break;
    case PadMode::Replicate:
      for (int64_t k = 0; k < b; ++k) s.push_back(0);
      for (int64_t i = 0; i < in; ++i) s.push_back(i);
      for (int64_t k = 0; k < e; ++k) s.push_back(in - 1);
      break;
    case PadMode::Circular:
      for (int64_t k = in - b; k < in; ++k) s.push_back(k);
      for (int64_t i = 0; i < in; ++i) s.push_back(i);
      for (int64_t k = 0; k < e; ++k) s.push_back(k);
      break;
  }
  return s;
}

struct Case {
  const char* what;
  PadMode mode;
  std::vector<int64_t> shape;  // the input's
  std::vector<int64_t> pads;   // PyTorch's order: the last dimension first
  float value = 0;
};

struct Built {
  PadGeom g;
  std::vector<std::vector<int64_t>> src;  // per dimension
  int64_t in_n = 1, out_n = 1;
};

Built build(const Case& c) {
  Built b;
  b.g.mode = c.mode;
  b.g.value = c.value;
  b.g.rank = static_cast<int>(c.shape.size());
  const std::size_t k = c.pads.size() / 2;
  for (std::size_t d = 0; d < c.shape.size(); ++d) {
    const std::size_t j = c.shape.size() - 1 - d;  // its place in the pads, when padded
    const int64_t before = j < k ? c.pads[2 * j] : 0, after = j < k ? c.pads[2 * j + 1] : 0;
    b.src.push_back(sources(c.mode, c.shape[d], before, after));
    b.g.in[d] = c.shape[d];
    b.g.out[d] = static_cast<int64_t>(b.src.back().size());
    b.g.before[d] = before;
    b.in_n *= b.g.in[d];
    b.out_n *= b.g.out[d];
  }
  return b;
}

// Calls f(output index, input index or -1) over the output in row-major order.
template <class F>
void walk(const Built& b, F&& f) {
  const int r = b.g.rank;
  std::vector<int64_t> at(r, 0);
  for (int64_t o = 0; o < b.out_n; ++o) {
    int64_t i = 0;
    bool fill = false;
    for (int d = 0; d < r; ++d) {
      const int64_t s = b.src[d][at[d]];
      fill = fill || s < 0;
      i = i * b.g.in[d] + (s < 0 ? 0 : s);
    }
    f(o, fill ? -1 : i);
    for (int d = r - 1; d >= 0 && ++at[d] == b.g.out[d]; --d) at[d] = 0;
  }
}

// Circular padding's gradient as PyTorch forms it: _pad_circular copies x
// into the middle of a buffer, then, the last dimension first, the begin
// border and the end border from the buffer's far side; CopySlices undoes the
// copies in reverse (the first dimension first, the end border before the
// begin one), adding each border's gradient into the slice it came from and
// zeroing it; x's gradient is then the middle, a slice.
std::vector<float> circular_grad(const Built& b, std::vector<float> g) {
  const int r = b.g.rank;
  std::vector<int64_t> stride(r, 1);
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * b.g.out[d + 1];
  const auto coord = [&](int64_t o, int d) { return o / stride[d] % b.g.out[d]; };
  for (int d = 0; d < r; ++d) {
    const int64_t in = b.g.in[d], pb = b.g.before[d], out = b.g.out[d];
    for (const bool end : {true, false})
      for (int64_t o = 0; o < b.out_n; ++o) {
        const int64_t x = coord(o, d);
        if (end ? x >= pb + in : x < pb) {
          g[o + (end ? -in : in) * stride[d]] += g[o];
          g[o] = 0;
        }
      }
    (void)out;
  }
  std::vector<float> dx;
  walk(b, [&](int64_t o, int64_t i) {
    bool middle = true;
    for (int d = 0; d < r; ++d) middle = middle && coord(o, d) >= b.g.before[d] && coord(o, d) < b.g.before[d] + b.g.in[d];
    if (middle) dx.push_back(g[o]), (void)i;
  });
  return dx;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"reflect 1-D", PadMode::Reflect, {2, 3, 7}, {3, 6}},
      {"reflect 2-D (ReflectionPad2d(3) of a CycleGAN)", PadMode::Reflect, {2, 3, 5, 4}, {3, 3, 3, 3}},
      {"reflect 2-D unbatched", PadMode::Reflect, {3, 5, 6}, {1, 0, 2, 4}},
      {"reflect 3-D", PadMode::Reflect, {1, 2, 3, 4, 5}, {1, 2, 0, 3, 2, 1}},
      {"replicate 1-D", PadMode::Replicate, {2, 2, 5}, {4, 7}},
      {"replicate 2-D, a size-1 dimension", PadMode::Replicate, {1, 2, 1, 6}, {2, 3, 3, 2}},
      {"replicate 3-D", PadMode::Replicate, {2, 1, 3, 2, 4}, {1, 0, 2, 2, 0, 3}},
      {"circular 1-D, pads equal to the size", PadMode::Circular, {2, 3, 4}, {4, 4}},
      {"circular 2-D (Conv2d padding_mode='circular')", PadMode::Circular, {2, 3, 5, 6}, {1, 1, 1, 1}},
      {"circular 3-D", PadMode::Circular, {1, 2, 3, 4, 2}, {2, 1, 0, 4, 3, 1}},
      {"constant causal (d, 0)", PadMode::Constant, {2, 4, 9}, {4, 0}},
      {"constant with a fill value", PadMode::Constant, {2, 3, 4, 5}, {1, 2, 0, 3}, 0.5f},
      {"constant over the channels (Swin's (0, 0, 0, r, 0, b))", PadMode::Constant, {2, 5, 6, 3}, {0, 0, 0, 2, 0, 1},
       -1.25f},
      {"constant cropping (negative pads)", PadMode::Constant, {2, 3, 6, 7}, {-2, 1, 1, -3}},
      {"constant cropping every element of a dimension's end", PadMode::Constant, {3, 8}, {-7, 0, 1, 1}},
  };
  return all;
}

TEST(Pad, ForwardCopiesWhatEachModeReads) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const Built b = build(c);
    const auto x = random_floats(static_cast<std::size_t>(b.in_n), 71);
    std::vector<float> y = garbage(static_cast<std::size_t>(b.out_n));
    pad_fwd(b.g, x.data(), y.data());
    int64_t wrong = 0;
    walk(b, [&](int64_t o, int64_t i) { wrong += bits(y[o]) != bits(i < 0 ? c.value : x[i]); });
    EXPECT_EQ(wrong, 0);
  }
}

TEST(Pad, BackwardHasPyTorchsBitsAndAccumulates) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const Built b = build(c);
    auto dy = random_floats(static_cast<std::size_t>(b.out_n), 72);
    dy[0] = -0.0f;  // a slice keeps its sign; a sum from +0 does not
    // PyTorch: grad_input zeroed, each output's gradient added in output order
    // (reflect, replicate); constant_pad_nd's backward slices the gradient.
    std::vector<float> want(static_cast<std::size_t>(b.in_n), 0.0f);
    walk(b, [&](int64_t o, int64_t i) {
      if (i < 0) return;
      if (c.mode == PadMode::Constant) want[i] = dy[o];
      else want[i] += dy[o];
    });
    if (c.mode == PadMode::Circular) {
      // Its own order (circular_grad), which differs from the row-major one.
      const auto rowwise = want;
      want = circular_grad(b, dy);
      ASSERT_EQ(want.size(), rowwise.size());
      for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], rowwise[i], 1e-5) << "circular_grad at " << i;
    }
    std::vector<float> dx = garbage(want.size());
    pad_bwd(b.g, dy.data(), dx.data(), false);
    int64_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) wrong += bits(dx[i]) != bits(want[i]);
    EXPECT_EQ(wrong, 0);
    // accumulate: the earlier gradient plus this one, added once.
    const auto before = random_floats(want.size(), 73);
    std::vector<float> acc = before;
    pad_bwd(b.g, dy.data(), acc.data(), true);
    wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) wrong += bits(acc[i]) != bits(before[i] + want[i]);
    EXPECT_EQ(wrong, 0);
  }
}

// The adjoint: Σ dy·pad(x) = Σ pad_bwd(dy)·x, in float64 over float32 values.
TEST(Pad, BackwardIsTheForwardsAdjoint) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    Built b = build(c);
    b.g.value = 0;  // the fill is a constant: no part of the linear map
    const auto x = random_floats(static_cast<std::size_t>(b.in_n), 74);
    const auto dy = random_floats(static_cast<std::size_t>(b.out_n), 75);
    std::vector<float> y(static_cast<std::size_t>(b.out_n)), dx(x.size());
    pad_fwd(b.g, x.data(), y.data());
    pad_bwd(b.g, dy.data(), dx.data(), false);
    double lhs = 0, rhs = 0;
    for (std::size_t o = 0; o < y.size(); ++o) lhs += static_cast<double>(dy[o]) * y[o];
    for (std::size_t i = 0; i < x.size(); ++i) rhs += static_cast<double>(dx[i]) * x[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
  }
}

}  // namespace
}  // namespace remat::cpu
