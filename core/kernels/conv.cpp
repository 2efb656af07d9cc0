// 2-D convolution (1-D is h = r = 1) as im2col + one Eigen GEMM per image and
// group. The columns of one (image, group) live in the caller's scratch:
//   col (cg·r·s, oh·ow), row (ci, kr, ks), column (oy, ox), cg = c / groups,
// which is conv2d_scratch_floats(). A pointwise convolution (1×1, stride 1, no
// padding) needs no columns: its input already is that matrix, and the forward
// reads it in place; the backward still uses the same amount of scratch for
// dcol, the gradient of the columns.
//
// The backward folds dcol back into dx by gathering, not scattering: every
// element of dx is the sum of its (kr, ks) taps in that order, formed once and
// then stored or added. So accumulate == true gives exactly dx + (what
// accumulate == false gives), the order never depends on the geometry's
// overlaps, and no second buffer is needed.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/eigen.h"
#include "core/kernels/reduce.h"

namespace remat::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("conv: " + what); }

void require_positive(const char* field, int64_t v) {
  if (v <= 0) bad(std::string(field) + " must be positive (got " + std::to_string(v) + ")");
}

// For out = 0 .. out_len-1 reading in = out·stride + offset, the range
// [lo, hi) of outputs whose input lies inside [0, in_len).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t out_len, int64_t in_len, int64_t stride, int64_t offset) {
  const auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; };
  const int64_t hi = std::min(out_len, ceil_div(in_len - offset, stride));
  const int64_t lo = std::min(ceil_div(-offset, stride), hi);
  return {lo, hi};
}

bool is_pointwise(const ConvGeom& g) {
  return g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// col (cg·r·s, oh·ow) of one image's group xg (cg, h, w); padding reads as zero.
void im2col(const ConvGeom& g, const float* xg, float* col) {
  const int64_t cg = g.c / g.groups, oh = g.oh(), ow = g.ow();
  for (int64_t ci = 0; ci < cg; ++ci) {
    const float* plane = xg + ci * g.h * g.w;
    for (int64_t kr = 0; kr < g.r; ++kr) {
      const Range ys = valid_outputs(oh, g.h, g.stride_h, kr * g.dil_h - g.pad_h);
      for (int64_t ks = 0; ks < g.s; ++ks) {
        float* dst = col + ((ci * g.r + kr) * g.s + ks) * oh * ow;
        const int64_t offw = ks * g.dil_w - g.pad_w;
        const Range xs = valid_outputs(ow, g.w, g.stride_w, offw);
        std::fill(dst, dst + ys.lo * ow, 0.0f);
        for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
          const float* src = plane + (oy * g.stride_h + kr * g.dil_h - g.pad_h) * g.w;
          float* d = dst + oy * ow;
          std::fill(d, d + xs.lo, 0.0f);
          if (g.stride_w == 1) {
            std::memcpy(d + xs.lo, src + xs.lo + offw, sizeof(float) * (xs.hi - xs.lo));
          } else {
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) d[ox] = src[ox * g.stride_w + offw];
          }
          std::fill(d + xs.hi, d + ow, 0.0f);
        }
        std::fill(dst + ys.hi * ow, dst + oh * ow, 0.0f);
      }
    }
  }
}

// dxg (cg, h, w) = or += the adjoint of im2col applied to dcol. `acc` holds w floats.
void col2im_gather(const ConvGeom& g, const float* dcol, float* dxg, bool accumulate, float* acc) {
  const int64_t cg = g.c / g.groups, oh = g.oh(), ow = g.ow();
  // Each column tap's valid outputs, once: valid_outputs divides, and inside
  // the row loop it cost 5-10% of a ResNet's training step.
  std::vector<Range> taps(static_cast<std::size_t>(g.s));
  for (int64_t ks = 0; ks < g.s; ++ks) taps[static_cast<std::size_t>(ks)] = valid_outputs(ow, g.w, g.stride_w, ks * g.dil_w - g.pad_w);
  for (int64_t ci = 0; ci < cg; ++ci) {
    for (int64_t ih = 0; ih < g.h; ++ih) {
      std::fill(acc, acc + g.w, 0.0f);
      for (int64_t kr = 0; kr < g.r; ++kr) {
        const int64_t ty = ih + g.pad_h - kr * g.dil_h;  // = oy·stride_h
        if (ty < 0 || ty % g.stride_h != 0 || ty / g.stride_h >= oh) continue;
        const int64_t oy = ty / g.stride_h;
        for (int64_t ks = 0; ks < g.s; ++ks) {
          const float* src = dcol + ((ci * g.r + kr) * g.s + ks) * oh * ow + oy * ow;
          const int64_t offw = ks * g.dil_w - g.pad_w;
          const Range xs = taps[static_cast<std::size_t>(ks)];
          if (g.stride_w == 1) {
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) acc[ox + offw] += src[ox];
          } else {
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) acc[ox * g.stride_w + offw] += src[ox];
          }
        }
      }
      float* row = dxg + (ci * g.h + ih) * g.w;
      if (accumulate) {
        for (int64_t i = 0; i < g.w; ++i) row[i] += acc[i];
      } else {
        std::copy(acc, acc + g.w, row);
      }
    }
  }
}

}  // namespace

void check_conv(const ConvGeom& g) {
  require_positive("n", g.n);
  require_positive("c", g.c);
  require_positive("h", g.h);
  require_positive("w", g.w);
  require_positive("k", g.k);
  require_positive("r", g.r);
  require_positive("s", g.s);
  require_positive("stride_h", g.stride_h);
  require_positive("stride_w", g.stride_w);
  require_positive("dil_h", g.dil_h);
  require_positive("dil_w", g.dil_w);
  require_positive("groups", g.groups);
  if (g.pad_h < 0) bad("pad_h must not be negative (got " + std::to_string(g.pad_h) + ")");
  if (g.pad_w < 0) bad("pad_w must not be negative (got " + std::to_string(g.pad_w) + ")");
  if (g.c % g.groups != 0)
    bad("groups = " + std::to_string(g.groups) + " does not divide c = " + std::to_string(g.c));
  if (g.k % g.groups != 0)
    bad("groups = " + std::to_string(g.groups) + " does not divide k = " + std::to_string(g.k));
  // Tested before oh()/ow(), whose integer division would round a negative
  // numerator up to a one-element output.
  const int64_t span_h = g.dil_h * (g.r - 1) + 1, span_w = g.dil_w * (g.s - 1) + 1;
  if (g.h + 2 * g.pad_h < span_h)
    bad("empty output: h + 2*pad_h = " + std::to_string(g.h + 2 * g.pad_h) +
        " is smaller than the dilated kernel height dil_h*(r-1)+1 = " + std::to_string(span_h));
  if (g.w + 2 * g.pad_w < span_w)
    bad("empty output: w + 2*pad_w = " + std::to_string(g.w + 2 * g.pad_w) +
        " is smaller than the dilated kernel width dil_w*(s-1)+1 = " + std::to_string(span_w));
}

int64_t conv2d_scratch_floats(const ConvGeom& g) {
  return (g.c / g.groups) * g.r * g.s * g.oh() * g.ow();
}

void conv2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y, float* scratch) {
  check_conv(g);
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, ohw = g.oh() * g.ow();
  const int64_t K = cg * g.r * g.s;  // GEMM depth
  const bool pointwise = is_pointwise(g);
  for (int64_t img = 0; img < g.n; ++img) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* xg = x + (img * g.c + grp * cg) * g.h * g.w;
      const float* col = xg;
      if (!pointwise) {
        im2col(g, xg, scratch);
        col = scratch;
      }
      Mat Y(y + (img * g.k + grp * kg) * ohw, kg, ohw);
      Y.noalias() = ConstMat(W + grp * kg * K, kg, K) * ConstMat(col, K, ohw);
    }
    // The bias is added after the product, as in linear_fwd: the GEMM sees the
    // same problem whatever b holds.
    if (b != nullptr) {
      for (int64_t ch = 0; ch < g.k; ++ch) {
        float* yc = y + (img * g.k + ch) * ohw;
        const float bias = b[ch];
        for (int64_t i = 0; i < ohw; ++i) yc[i] += bias;
      }
    }
  }
}

void conv2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                bool accumulate, float* scratch) {
  check_conv(g);
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, ohw = g.oh() * g.ow();
  const int64_t K = cg * g.r * g.s;
  const bool pointwise = is_pointwise(g);
  std::vector<float> acc(dx != nullptr ? g.w : 0);  // one row of dx being gathered
  for (int64_t img = 0; img < g.n; ++img) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* xg = x + (img * g.c + grp * cg) * g.h * g.w;
      const ConstMat dY(dy + (img * g.k + grp * kg) * ohw, kg, ohw);
      const ConstMat Wg(W + grp * kg * K, kg, K);
      // dW_g (kg, K) += dY_g · colᵀ; images in order, so the sum is reproducible.
      const float* col = xg;
      if (!pointwise) {
        im2col(g, xg, scratch);
        col = scratch;
      }
      Mat(dW + grp * kg * K, kg, K).noalias() += dY * ConstMat(col, K, ohw).transpose();
      if (dx == nullptr) continue;
      // dcol (K, ohw) = W_gᵀ · dY_g overwrites the columns, which are done with.
      Mat(scratch, K, ohw).noalias() = Wg.transpose() * dY;
      col2im_gather(g, scratch, dx + (img * g.c + grp * cg) * g.h * g.w, accumulate, acc.data());
    }
  }
  if (db != nullptr) {
    for (int64_t ch = 0; ch < g.k; ++ch) {
      double sum = 0.0;
      for (int64_t img = 0; img < g.n; ++img) sum += sum_f64(dy + (img * g.k + ch) * ohw, ohw);
      db[ch] += static_cast<float>(sum);
    }
  }
}

}  // namespace remat::cpu
