// The fused attention kernels (gpu/kernels/sdpa.cu) against the CPU's
// (core/kernels/sdpa.cpp): out and lse within kTol, dq, dk, dv within kGemmTol,
// causal and not, strided q/k/v (a GPT's qkv split, a transposed k) and out, tq != tk,
// accumulation, q = k = v one tensor into one gradient buffer, head dimensions
// up to the 256 limit, and reruns bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace {

using namespace remat::gpu_testing;  // NOLINT: the fixture and helpers of every GPU kernel test
using remat::cpu::SdpaGeom;

std::string str(const SdpaGeom& g) {
  return "sdpa b" + std::to_string(g.batch) + " h" + std::to_string(g.heads) + " tq" + std::to_string(g.tq) + " tk" +
         std::to_string(g.tk) + " d" + std::to_string(g.d) + " dv" + std::to_string(g.dv) +
         (g.causal ? " causal" : "");
}

SdpaGeom geom(int64_t batch, int64_t heads, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal) {
  SdpaGeom g;
  g.batch = batch, g.heads = heads, g.tq = tq, g.tk = tk, g.d = d, g.dv = dv;
  g.causal = causal;
  g.scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Contiguous (batch, heads, rows, cols) unless a case sets other strides.
  g.q_strides = {heads * tq * d, tq * d, d, 1};
  g.k_strides = {heads * tk * d, tk * d, d, 1};
  g.v_strides = {heads * tk * dv, tk * dv, dv, 1};
  g.out_strides = SdpaGeom::dense_strides(heads, tq, dv);
  return g;
}

// One case: q, k, v are views into host buffers (qb, kb, vb; the same buffer
// where the case shares one), with the gradients' initial contents.
struct Case {
  SdpaGeom g;
  Vec qb, kb, vb;
  int64_t q_off = 0, k_off = 0, v_off = 0;  // each view's first element in its buffer
  bool shared_qkv = false;                  // q, k, v one tensor (qb), one gradient buffer
  bool acc_q = false, acc_k = false, acc_v = false;
  Vec dq0, dk0, dv0;  // gradients before the backward (NaN where overwritten)
};

struct Results {
  Vec out, lse, dq, dk, dv;
};

Results run_cpu(const Case& c, const Vec& dout) {
  const SdpaGeom& g = c.g;
  Results r;
  Vec scratch(static_cast<size_t>(g.scratch_floats()));
  r.out.assign(static_cast<size_t>(g.batch * g.heads * g.tq * g.dv), 0.0f);
  r.lse.assign(static_cast<size_t>(g.batch * g.heads * g.tq), 0.0f);
  const float* q = c.qb.data() + c.q_off;
  const float* k = (c.shared_qkv ? c.qb : c.kb).data() + c.k_off;
  const float* v = (c.shared_qkv ? c.qb : c.vb).data() + c.v_off;
  remat::cpu::sdpa_fwd(g, q, k, v, r.out.data(), r.lse.data(), scratch.data());
  r.dq = c.dq0;
  if (c.shared_qkv) {
    remat::cpu::sdpa_bwd(g, q, k, v, r.out.data(), r.lse.data(), dout.data(), r.dq.data(), r.dq.data(),
                         r.dq.data(), c.acc_q, c.acc_k, c.acc_v, scratch.data());
  } else {
    r.dk = c.dk0;
    r.dv = c.dv0;
    remat::cpu::sdpa_bwd(g, q, k, v, r.out.data(), r.lse.data(), dout.data(), r.dq.data(), r.dk.data(),
                         r.dv.data(), c.acc_q, c.acc_k, c.acc_v, scratch.data());
  }
  return r;
}

Results run_gpu(const Case& c, const Vec& dout, cudaStream_t stream) {
  const SdpaGeom& g = c.g;
  const Dev qd(c.qb), kd(c.shared_qkv ? Vec{} : c.kb), vd(c.shared_qkv ? Vec{} : c.vb);
  const Dev out_d(nan_vec(static_cast<size_t>(g.batch * g.heads * g.tq * g.dv)));
  const Dev lse_d(nan_vec(static_cast<size_t>(g.batch * g.heads * g.tq)));
  const Dev scratch_d(nan_vec(static_cast<size_t>(g.scratch_floats())));
  const Dev dout_d(dout);
  const float* q = qd.get() + c.q_off;
  const float* k = (c.shared_qkv ? qd : kd).get() + c.k_off;
  const float* v = (c.shared_qkv ? qd : vd).get() + c.v_off;
  gpu::sdpa_fwd(g, q, k, v, out_d.get(), lse_d.get(), scratch_d.get(), stream);
  const Dev dq_d(c.dq0), dk_d(c.shared_qkv ? Vec{} : c.dk0), dv_d(c.shared_qkv ? Vec{} : c.dv0);
  float* dk = c.shared_qkv ? dq_d.get() : dk_d.get();
  float* dv = c.shared_qkv ? dq_d.get() : dv_d.get();
  gpu::sdpa_bwd(g, q, k, v, out_d.get(), lse_d.get(), dout_d.get(), dq_d.get(), dk, dv, c.acc_q, c.acc_k, c.acc_v,
                scratch_d.get(), stream);
  Results r;
  r.out = out_d.fetch();
  r.lse = lse_d.fetch();
  r.dq = dq_d.fetch();
  if (!c.shared_qkv) {
    r.dk = dk_d.fetch();
    r.dv = dv_d.fetch();
  }
  return r;
}

// GPU against CPU; then the GPU again, bit for bit.
void check(const Case& c, cudaStream_t stream) {
  const SdpaGeom& g = c.g;
  const std::string name = str(g) + (c.shared_qkv ? " q=k=v" : "") + (c.acc_q ? " acc" : "");
  SCOPED_TRACE(name);
  const Vec dout = random_vec(static_cast<size_t>(g.batch * g.heads * g.tq * g.dv), 77);
  const Results want = run_cpu(c, dout);
  const Results got = run_gpu(c, dout, stream);
  expect_close(got.out, want.out, kTol, name + " out");
  expect_close(got.lse, want.lse, kTol, name + " lse");
  expect_close(got.dq, want.dq, kGemmTol, name + (c.shared_qkv ? " dqkv" : " dq"));
  if (!c.shared_qkv) {
    expect_close(got.dk, want.dk, kGemmTol, name + " dk");
    expect_close(got.dv, want.dv, kGemmTol, name + " dv");
  }
  const Results again = run_gpu(c, dout, stream);
  expect_bitwise(again.out, got.out, name + " out again");
  expect_bitwise(again.lse, got.lse, name + " lse again");
  expect_bitwise(again.dq, got.dq, name + " dq again");
  if (!c.shared_qkv) {
    expect_bitwise(again.dk, got.dk, name + " dk again");
    expect_bitwise(again.dv, got.dv, name + " dv again");
  }
}

size_t q_numel(const SdpaGeom& g) { return static_cast<size_t>(g.batch * g.heads * g.tq * g.d); }
size_t k_numel(const SdpaGeom& g) { return static_cast<size_t>(g.batch * g.heads * g.tk * g.d); }
size_t v_numel(const SdpaGeom& g) { return static_cast<size_t>(g.batch * g.heads * g.tk * g.dv); }

// Separate contiguous q, k, v; gradients overwritten (from NaN) or accumulated.
Case plain(const SdpaGeom& g, bool accumulate) {
  Case c;
  c.g = g;
  c.qb = random_vec(q_numel(g), 1);
  c.kb = random_vec(k_numel(g), 2);
  c.vb = random_vec(v_numel(g), 3);
  c.acc_q = c.acc_k = c.acc_v = accumulate;
  c.dq0 = accumulate ? random_vec(q_numel(g), 4) : nan_vec(q_numel(g));
  c.dk0 = accumulate ? random_vec(k_numel(g), 5) : nan_vec(k_numel(g));
  c.dv0 = accumulate ? random_vec(v_numel(g), 6) : nan_vec(v_numel(g));
  return c;
}

class GpuSdpa : public GpuKernels {};

// (a) A GPT's split: one (batch, t, 3·h·d) projection, q, k and v its thirds
// viewed as (batch, h, t, d): strides (t·w, d, w, 1) with w the row width; out
// laid out in q's dimension order, (batch, t, h, dv), as PyTorch's.
TEST_F(GpuSdpa, CausalStridedQkvSplitMatchesCpu) {
  const int64_t b = 2, h = 3, t = 7, d = 8, dv = 5;
  const int64_t w = 2 * h * d + h * dv;
  SdpaGeom g = geom(b, h, t, t, d, dv, true);
  g.q_strides = {t * w, d, w, 1};
  g.k_strides = {t * w, d, w, 1};
  g.v_strides = {t * w, dv, w, 1};
  g.out_strides = {t * h * dv, dv, h * dv, 1};
  Case c;
  c.g = g;
  c.qb = random_vec(static_cast<size_t>(b * t * w), 21);
  c.kb = c.qb;
  c.vb = c.qb;
  c.q_off = 0, c.k_off = h * d, c.v_off = 2 * h * d;
  c.dq0 = nan_vec(q_numel(g));
  c.dk0 = nan_vec(k_numel(g));
  c.dv0 = nan_vec(v_numel(g));
  check(c, stream_);
}

// (b) Not causal, tq != tk both ways, k read transposed (column stride != 1).
TEST_F(GpuSdpa, NonCausalUnequalLengthsMatchCpu) {
  for (const auto& [tq, tk] : {std::array<int64_t, 2>{5, 9}, std::array<int64_t, 2>{9, 5}}) {
    SdpaGeom g = geom(2, 2, tq, tk, 16, 12, false);
    g.k_strides = {2 * 16 * tk, 16 * tk, 1, tk};  // k stored (batch, heads, d, tk)
    check(plain(g, false), stream_);
  }
  // Causal with tq != tk: rows past tk see every key; keys past tq get no gradient.
  check(plain(geom(1, 2, 9, 5, 8, 8, true), false), stream_);
  check(plain(geom(1, 2, 5, 9, 8, 8, true), false), stream_);
}

// (c) Accumulation: dq, dk, dv start with values the gradients are added to.
TEST_F(GpuSdpa, AccumulateMatchesCpu) {
  check(plain(geom(2, 3, 7, 7, 8, 5, true), true), stream_);
  check(plain(geom(1, 2, 6, 11, 16, 16, false), true), stream_);
}

// (d) Self-attention on one tensor: dq, dk, dv one buffer, dq stored (from
// NaN: never read), dk and dv added.
TEST_F(GpuSdpa, OneTensorForQKAndVMatchesCpu) {
  for (const bool causal : {true, false}) {
    const SdpaGeom g = geom(2, 2, 6, 6, 8, 8, causal);
    Case c;
    c.g = g;
    c.qb = random_vec(q_numel(g), 31);
    c.shared_qkv = true;
    c.acc_q = false, c.acc_k = true, c.acc_v = true;
    c.dq0 = nan_vec(q_numel(g));
    check(c, stream_);
  }
}

// Several tiles of keys and of query rows (32 per tile, 8 rows per block),
// and head dimensions at the limit (above 48 KiB of shared memory).
TEST_F(GpuSdpa, LongSequencesAndWideHeadsMatchCpu) {
  check(plain(geom(1, 2, 70, 70, 64, 64, true), false), stream_);
  check(plain(geom(2, 1, 45, 67, 32, 48, false), true), stream_);
  check(plain(geom(1, 1, 33, 40, 256, 200, true), false), stream_);
}

TEST_F(GpuSdpa, RefusesHeadDimensionsAbove256AndSpreadOutputColumns) {
  const SdpaGeom g = geom(1, 1, 4, 4, 257, 8, false);
  EXPECT_THROW(gpu::sdpa_fwd(g, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, stream_),
               std::invalid_argument);
  SdpaGeom h = geom(1, 1, 4, 4, 8, 300, false);
  EXPECT_THROW(gpu::sdpa_bwd(h, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             false, false, false, nullptr, stream_),
               std::invalid_argument);
  h.dv = 8;
  h.out_strides = {32, 32, 8, 2};  // the output's columns must be adjacent, as on the CPU
  EXPECT_THROW(gpu::sdpa_fwd(h, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, stream_),
               std::invalid_argument);
}

}  // namespace
