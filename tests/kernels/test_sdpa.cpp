// Fused attention (sdpa.cpp) against a float64 reference over strided q, k, v
// (the transposed views of one projection a GPT makes), causal or not, tq and
// tk apart; its backward against finite differences of that reference; the
// accumulate rule, q = k = v, and bit-identical reruns.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::expect_grad_near;
using test::garbage;
using test::random_floats;

// q, k, v as views into one buffer laid out (batch, t, 3, heads, d), as
// x @ W_qkv split and transposed to (batch, heads, t, d): strides
// (t·3·h·d, d, 3·h·d, 1), k and v offset by h·d and 2·h·d.
struct Packed {
  int64_t batch, heads, t, d;
  std::vector<float> buf;
  SdpaGeom geom(bool causal) const {
    SdpaGeom g;
    g.batch = batch, g.heads = heads, g.tq = g.tk = t, g.d = g.dv = d, g.causal = causal;
    g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    g.q_strides = g.k_strides = g.v_strides = {t * 3 * heads * d, d, 3 * heads * d, 1};
    // As PyTorch lays the output out: q's dimension order, (batch, t, heads, d).
    g.out_strides = {t * heads * d, d, heads * d, 1};
    return g;
  }
  const float* q() const { return buf.data(); }
  const float* k() const { return buf.data() + heads * d; }
  const float* v() const { return buf.data() + 2 * heads * d; }
};
Packed packed(int64_t batch, int64_t heads, int64_t t, int64_t d, uint32_t seed) {
  return {batch, heads, t, d, random_floats(static_cast<size_t>(batch * t * 3 * heads * d), seed, -1.5f, 1.5f)};
}

// The reference on plain (batch·heads, rows, cols) arrays in double.
struct Ref {
  std::vector<double> out, lse;
};
Ref reference(const SdpaGeom& g, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v) {
  Ref r{std::vector<double>(static_cast<size_t>(g.batch * g.heads * g.tq * g.dv)),
        std::vector<double>(static_cast<size_t>(g.batch * g.heads * g.tq))};
  for (int64_t h = 0; h < g.batch * g.heads; ++h) {
    for (int64_t i = 0; i < g.tq; ++i) {
      const int64_t n = g.causal ? std::min(g.tk, i + 1) : g.tk;
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < g.d; ++c) dot += q[(h * g.tq + i) * g.d + c] * k[(h * g.tk + j) * g.d + c];
        s[j] = dot * g.scale;
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - mx);
      r.lse[h * g.tq + i] = mx + std::log(sum);
      for (int64_t c = 0; c < g.dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j) o += std::exp(s[j] - mx) / sum * v[(h * g.tk + j) * g.dv + c];
        r.out[(h * g.tq + i) * g.dv + c] = o;
      }
    }
  }
  return r;
}

// A strided operand gathered into (batch·heads, rows, cols) doubles.
std::vector<double> dense(const float* x, const std::array<int64_t, 4>& st, const SdpaGeom& g, int64_t rows,
                          int64_t cols) {
  std::vector<double> out;
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t h = 0; h < g.heads; ++h)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out.push_back(x[b * st[0] + h * st[1] + r * st[2] + c * st[3]]);
  return out;
}

TEST(Sdpa, ForwardMatchesTheReferenceOnStridedViews) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Packed p = packed(2, 3, 7, 8, 41);
    const SdpaGeom g = p.geom(causal);
    std::vector<float> out(static_cast<size_t>(2 * 3 * 7 * 8)), lse(2 * 3 * 7), scratch(g.scratch_floats());
    sdpa_fwd(g, p.q(), p.k(), p.v(), out.data(), lse.data(), scratch.data());
    const Ref r = reference(g, dense(p.q(), g.q_strides, g, 7, 8), dense(p.k(), g.k_strides, g, 7, 8),
                            dense(p.v(), g.v_strides, g, 7, 8));
    const std::vector<double> logical = dense(out.data(), g.out_strides, g, 7, 8);
    for (size_t i = 0; i < logical.size(); ++i) EXPECT_NEAR(logical[i], r.out[i], 2e-6) << i;
    for (size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(lse[i], r.lse[i], 2e-6) << i;
    if (causal) {  // the first query sees the first key alone: its output is v's first row
      for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(out[c], p.v()[c]);
    }
    // The backward reads out through the same strides: the gradients of a
    // contiguous copy of it are the same bits.
    SdpaGeom dense_g = g;
    dense_g.out_strides = SdpaGeom::dense_strides(3, 7, 8);
    const std::vector<float> out_dense(logical.begin(), logical.end());
    const auto dout = random_floats(out.size(), 42);
    std::vector<float> grads[2];
    for (int run = 0; run < 2; ++run) {
      std::vector<float> dq(out.size()), dk(out.size()), dv(out.size());
      sdpa_bwd(run ? dense_g : g, p.q(), p.k(), p.v(), run ? out_dense.data() : out.data(), lse.data(), dout.data(),
               dq.data(), dk.data(), dv.data(), false, false, false, scratch.data());
      grads[run] = dq;
      grads[run].insert(grads[run].end(), dk.begin(), dk.end());
      grads[run].insert(grads[run].end(), dv.begin(), dv.end());
    }
    EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * 4), 0);
  }
}

// Contiguous (batch, heads, rows, cols) inputs with tq != tk and dv != d.
struct Plain {
  SdpaGeom g;
  std::vector<float> q, k, v;
};
Plain plain(bool causal) {
  Plain p;
  p.g.batch = 2, p.g.heads = 2, p.g.tq = 5, p.g.tk = 6, p.g.d = 4, p.g.dv = 3, p.g.causal = causal, p.g.scale = 0.7f;
  p.g.q_strides = {2 * 5 * 4, 5 * 4, 4, 1};
  p.g.k_strides = {2 * 6 * 4, 6 * 4, 4, 1};
  p.g.v_strides = {2 * 6 * 3, 6 * 3, 3, 1};
  p.g.out_strides = SdpaGeom::dense_strides(2, 5, 3);
  p.q = random_floats(2 * 2 * 5 * 4, 51, -1, 1);
  p.k = random_floats(2 * 2 * 6 * 4, 52, -1, 1);
  p.v = random_floats(2 * 2 * 6 * 3, 53, -1, 1);
  return p;
}

TEST(Sdpa, BackwardMatchesFiniteDifferences) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Plain p = plain(causal);
    const SdpaGeom& g = p.g;
    std::vector<float> out(2 * 2 * 5 * 3), lse(2 * 2 * 5), scratch(g.scratch_floats());
    sdpa_fwd(g, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), scratch.data());
    const auto dout = random_floats(out.size(), 54);
    std::vector<float> dq = garbage(p.q.size()), dk = garbage(p.k.size()), dv = garbage(p.v.size());
    sdpa_bwd(g, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), dout.data(), dq.data(), dk.data(),
             dv.data(), false, false, false, scratch.data());
    std::vector<double> q = test::to_double(p.q), k = test::to_double(p.k), v = test::to_double(p.v);
    auto f = [&] { return test::weighted_sum(reference(g, q, k, v).out, dout); };
    expect_grad_near(dq, test::numeric_grad(q, f), "dq");
    expect_grad_near(dk, test::numeric_grad(k, f), "dk");
    expect_grad_near(dv, test::numeric_grad(v, f), "dv");
  }
}

TEST(Sdpa, AccumulateAddsTheFreshGradientAndRerunsAreBitIdentical) {
  Plain p = plain(true);
  const SdpaGeom& g = p.g;
  std::vector<float> out(2 * 2 * 5 * 3), lse(2 * 2 * 5), scratch(g.scratch_floats());
  sdpa_fwd(g, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), scratch.data());
  std::vector<float> out2(out.size(), 9.0f), lse2(lse.size(), 9.0f);
  std::fill(scratch.begin(), scratch.end(), 7.0f);
  sdpa_fwd(g, p.q.data(), p.k.data(), p.v.data(), out2.data(), lse2.data(), scratch.data());
  EXPECT_EQ(std::memcmp(out.data(), out2.data(), out.size() * 4), 0);
  EXPECT_EQ(std::memcmp(lse.data(), lse2.data(), lse.size() * 4), 0);
  const auto dout = random_floats(out.size(), 55);
  std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  sdpa_bwd(g, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), dout.data(), dq.data(), dk.data(),
           dv.data(), false, false, false, scratch.data());
  const auto q0 = random_floats(dq.size(), 56), k0 = random_floats(dk.size(), 57), v0 = random_floats(dv.size(), 58);
  std::vector<float> aq = q0, ak = k0, av = v0;
  sdpa_bwd(g, p.q.data(), p.k.data(), p.v.data(), out.data(), lse.data(), dout.data(), aq.data(), ak.data(),
           av.data(), true, true, true, scratch.data());
  for (size_t i = 0; i < dq.size(); ++i) EXPECT_EQ(aq[i], q0[i] + dq[i]) << i;
  for (size_t i = 0; i < dk.size(); ++i) EXPECT_EQ(ak[i], k0[i] + dk[i]) << i;
  for (size_t i = 0; i < dv.size(); ++i) EXPECT_EQ(av[i], v0[i] + dv[i]) << i;
}

// Self-attention on one tensor: the executor hands one gradient buffer three
// times, overwritten by q's share and added to by k's and v's, in that order.
TEST(Sdpa, OneTensorAsQKAndVGetsTheThreeSharesInOrder) {
  SdpaGeom g;
  g.batch = 1, g.heads = 2, g.tq = g.tk = 4, g.d = g.dv = 3, g.causal = true, g.scale = 0.5f;
  g.q_strides = g.k_strides = g.v_strides = {2 * 4 * 3, 4 * 3, 3, 1};
  g.out_strides = SdpaGeom::dense_strides(2, 4, 3);
  const auto x = random_floats(2 * 4 * 3, 61, -1, 1);
  std::vector<float> out(x.size()), lse(8), scratch(g.scratch_floats());
  sdpa_fwd(g, x.data(), x.data(), x.data(), out.data(), lse.data(), scratch.data());
  const auto dout = random_floats(out.size(), 62);
  std::vector<float> dq(x.size()), dk(x.size()), dv(x.size());
  sdpa_bwd(g, x.data(), x.data(), x.data(), out.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data(),
           false, false, false, scratch.data());
  std::vector<float> dx = garbage(x.size());
  sdpa_bwd(g, x.data(), x.data(), x.data(), out.data(), lse.data(), dout.data(), dx.data(), dx.data(), dx.data(),
           false, true, true, scratch.data());
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx[i], (dq[i] + dk[i]) + dv[i]) << i;
}

TEST(Sdpa, RefusesEmptyShapesAndANonPositiveScale) {
  SdpaGeom g;
  g.tq = g.tk = g.d = g.dv = 2;
  g.out_strides = SdpaGeom::dense_strides(1, 2, 2);
  g.scale = 0;
  float buf[64] = {};
  EXPECT_THROW(sdpa_fwd(g, buf, buf, buf, buf, buf, buf), std::invalid_argument);
  g.scale = 1, g.tk = 0;
  EXPECT_THROW(sdpa_fwd(g, buf, buf, buf, buf, buf, buf), std::invalid_argument);
}

}  // namespace
}  // namespace remat::cpu
