// Fused scaled dot-product attention, one head at a time: its q, k and v
// gathered into contiguous blocks (they arrive as strided views), the scores
// and their products on Eigen's GEMM, each row's softmax as softmax_fwd forms
// it. The backward recomputes the scores from q, k and the saved logsumexp,
// as FlashAttention's does, instead of keeping the (tq, tk) probabilities.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/eigen.h"
#include "core/kernels/exp_nonpositive.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax_row.h"

namespace remat::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

using StridedMat = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;

// One head's (tq, dv) block of the output, rows out_strides[2] apart.
template <class T>
T* out_block(const SdpaGeom& g, T* out, int64_t b, int64_t h) {
  return out + b * g.out_strides[0] + h * g.out_strides[1];
}

// One head's (rows, cols) block of x, read through strides, into dst.
void gather(const float* x, const std::array<int64_t, 4>& st, int64_t b, int64_t h, int64_t rows, int64_t cols,
            float* dst) {
  const float* base = x + b * st[0] + h * st[1];
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = base + r * st[2];
    float* out = dst + r * cols;
    if (st[3] == 1) {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) out[c] = row[c * st[3]];
    }
  }
}

// One head's q, k and v gathered, one after the other, into the front of
// scratch; `rest` is the scratch that follows them.
struct HeadBlocks {
  float *q, *k, *v, *rest;
};
HeadBlocks gather_head(const SdpaGeom& g, const float* q, const float* k, const float* v, int64_t b, int64_t h,
                       float* scratch) {
  HeadBlocks hb{scratch, scratch + g.tq * g.d, scratch + g.tq * g.d + g.tk * g.d, nullptr};
  hb.rest = hb.v + g.tk * g.dv;
  gather(q, g.q_strides, b, h, g.tq, g.d, hb.q);
  gather(k, g.k_strides, b, h, g.tk, g.d, hb.k);
  gather(v, g.v_strides, b, h, g.tk, g.dv, hb.v);
  return hb;
}

// Keys a query row sees: all, or j <= i when causal.
int64_t visible(const SdpaGeom& g, int64_t i) { return g.causal ? std::min(g.tk, i + 1) : g.tk; }

// Row i of head (b, h) of the additive mask, or null without one.
const float* mask_row(const SdpaGeom& g, int64_t b, int64_t h, int64_t i) {
  return g.mask ? g.mask + b * g.mask_strides[0] + h * g.mask_strides[1] + i * g.mask_strides[2] : nullptr;
}

}  // namespace

void SdpaGeom::check(const char* fn) const {
  if (batch < 1 || heads < 1 || tq < 1 || tk < 1 || d < 1 || dv < 1)
    throw std::invalid_argument(std::string(fn) + ": every dimension must be positive");
  if (!(scale > 0)) throw std::invalid_argument(std::string(fn) + ": scale must be positive");
  if (out_strides[3] != 1)
    throw std::invalid_argument(std::string(fn) + ": out_strides[3] must be 1 (the output's columns adjacent)");
}

int64_t SdpaGeom::scratch_floats() const {
  const int64_t blocks = tq * d + tk * d + tk * dv;
  // Forward: the blocks and the scores; backward: the blocks, the
  // probabilities and their gradient, and the three fresh gradients.
  return std::max(blocks + tq * tk, 2 * blocks + 2 * tq * tk);
}

void sdpa_fwd(const SdpaGeom& g, const float* q, const float* k, const float* v, float* out, float* lse,
              float* scratch) {
  g.check("sdpa_fwd");
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t h = 0; h < g.heads; ++h) {
      const int64_t head = b * g.heads + h;
      const HeadBlocks hb = gather_head(g, q, k, v, b, h, scratch);
      float* s = hb.rest;
      Mat S(s, g.tq, g.tk);
      S.noalias() = ConstMat(hb.q, g.tq, g.d) * ConstMat(hb.k, g.tk, g.d).transpose();
      for (int64_t i = 0; i < g.tq; ++i) {
        float* row = s + i * g.tk;
        const int64_t n = visible(g, i);
        for (int64_t j = 0; j < n; ++j) row[j] *= g.scale;
        if (const float* m = mask_row(g, b, h, i))
          for (int64_t j = 0; j < n; ++j) row[j] += m[j * g.mask_strides[3]];
        const RowSoftmax r = softmax_row(row, row, n);
        lse[head * g.tq + i] = static_cast<float>(static_cast<double>(r.max) + std::log(r.sum));
        for (int64_t j = n; j < g.tk; ++j) row[j] = 0.0f;  // masked: no weight
      }
      StridedMat(out_block(g, out, b, h), g.tq, g.dv, Eigen::OuterStride<>(g.out_strides[2])).noalias() =
          S * ConstMat(hb.v, g.tk, g.dv);
    }
  }
}

void sdpa_bwd(const SdpaGeom& g, const float* q, const float* k, const float* v, const float* out,
              const float* lse, const float* dout, float* dq, float* dk, float* dv, bool acc_q, bool acc_k,
              bool acc_v, float* scratch) {
  g.check("sdpa_bwd");
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t h = 0; h < g.heads; ++h) {
      const int64_t head = b * g.heads + h;
      const HeadBlocks hb = gather_head(g, q, k, v, b, h, scratch);
      float* p = hb.rest;
      float* dp = p + g.tq * g.tk;
      float* dqs = dp + g.tq * g.tk;
      float* dks = dqs + g.tq * g.d;
      float* dvs = dks + g.tk * g.d;
      const ConstMat Q(hb.q, g.tq, g.d), K(hb.k, g.tk, g.d), V(hb.v, g.tk, g.dv);
      const float* ob = out_block(g, out, b, h);
      const ConstMat dO(dout + head * g.tq * g.dv, g.tq, g.dv);
      // P = exp(s·scale − lse), the forward's probabilities recomputed.
      Mat P(p, g.tq, g.tk), dP(dp, g.tq, g.tk);
      P.noalias() = Q * K.transpose();
      for (int64_t i = 0; i < g.tq; ++i) {
        float* row = p + i * g.tk;
        const int64_t n = visible(g, i);
        const float l = lse[head * g.tq + i];
        // s·scale (+ mask) − lse <= 0 but for rounding: clamped, exp's domain.
        if (const float* m = mask_row(g, b, h, i))
          for (int64_t j = 0; j < n; ++j)
            row[j] = exp_nonpositive(std::min(row[j] * g.scale + m[j * g.mask_strides[3]] - l, 0.0f));
        else
          for (int64_t j = 0; j < n; ++j) row[j] = exp_nonpositive(std::min(row[j] * g.scale - l, 0.0f));
        for (int64_t j = n; j < g.tk; ++j) row[j] = 0.0f;
      }
      // dv = Pᵀ·dO; dP = dO·vᵀ; dS = P ∘ (dP − rowsum(dO ∘ O)), times scale.
      Mat(dvs, g.tk, g.dv).noalias() = P.transpose() * dO;
      dP.noalias() = dO * V.transpose();
      for (int64_t i = 0; i < g.tq; ++i) {
        const float di = static_cast<float>(dot_f64(dout + (head * g.tq + i) * g.dv, ob + i * g.out_strides[2], g.dv));
        float* dpr = dp + i * g.tk;
        const float* pr = p + i * g.tk;
        const int64_t n = visible(g, i);
        for (int64_t j = 0; j < n; ++j) dpr[j] = pr[j] * (dpr[j] - di) * g.scale;
        for (int64_t j = n; j < g.tk; ++j) dpr[j] = 0.0f;  // masked: no gradient, whatever dP holds
      }
      // dq = dS·k; dk = dSᵀ·q.
      Mat(dqs, g.tq, g.d).noalias() = dP * K;
      Mat(dks, g.tk, g.d).noalias() = dP.transpose() * Q;
      if (dq) add_into(dqs, dq + head * g.tq * g.d, g.tq * g.d, acc_q);
      if (dk) add_into(dks, dk + head * g.tk * g.d, g.tk * g.d, acc_k);
      if (dv) add_into(dvs, dv + head * g.tk * g.dv, g.tk * g.dv, acc_v);
    }
  }
}

}  // namespace remat::cpu
