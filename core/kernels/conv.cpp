// 2-D convolution (1-D is h = r = 1) as im2col + one Eigen GEMM per group and
// run of images. The columns of a run of nb images live in the caller's scratch:
//   col (cg·r·s, nb·oh·ow), row (ci, kr, ks), column (image, oy, ox),
// cg = c / groups. One image per product wastes a deep layer: at 7×7 (49
// columns) the GEMM repacks all of W for 49 columns, and the backward's
// dW += dY·colᵀ is 49 deep, so it reads and writes dW once per 49 FMAs. So
// images go together until a product has kMinColumns columns
// (conv2d_images_per_gemm); the run's output rows, or dy's, then need a
// (kg, nb·oh·ow) buffer of their own beside the columns, since each image's
// rows lie apart in NCHW. With one image per product a pointwise convolution
// (1×1, stride 1, no padding) needs no columns: its input already is that
// matrix, and the forward reads it in place; the backward still uses the same
// amount of scratch for dcol, the gradient of the columns. The run length
// depends on the geometry alone, so every strategy's products, and their
// rounding, are the same.
//
// The backward folds dcol back into dx by gathering, not scattering: every
// element of dx is the sum of its (kr, ks) taps in that order, formed once and
// then stored or added. So accumulate == true gives exactly dx + (what
// accumulate == false gives), and the order never depends on the geometry's
// overlaps. The sums are formed in a row of w floats (col2im_gather), or, for
// a stride-1 convolution as wide as its input, a plane of h·w (col2im_flat,
// which adds each tap's whole block at once, in the same order).
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

// Stride 1 and as wide as the input ("same" padding): output (oy, ox) of a tap
// reads plane element (oy + kr·dil_h − pad_h)·w + ox + offw, so a tap's whole
// (oh, ow) block maps to one shifted run of the plane.
bool is_flat(const ConvGeom& g) { return g.stride_h == 1 && g.stride_w == 1 && g.ow() == g.w; }

// Each column tap ks's valid outputs, once per call: valid_outputs divides,
// and inside the row loops it cost 5-10% of a ResNet's training step.
std::vector<Range> column_taps(const ConvGeom& g) {
  std::vector<Range> taps(static_cast<std::size_t>(g.s));
  for (int64_t ks = 0; ks < g.s; ++ks)
    taps[static_cast<std::size_t>(ks)] = valid_outputs(g.ow(), g.w, g.stride_w, ks * g.dil_w - g.pad_w);
  return taps;
}

// Columns per product that make a GEMM worth its packing (see the top).
constexpr int64_t kMinColumns = 512;

// col (cg·r·s, oh·ow) of one image's group xg (cg, h, w), row i at col + i·ld;
// padding reads as zero. xs_of: column_taps(g).
void im2col(const ConvGeom& g, const std::vector<Range>& xs_of, const float* xg, float* col, int64_t ld) {
  const int64_t cg = g.c / g.groups, oh = g.oh(), ow = g.ow();
  // A deep layer's rows are a few floats long: they are copied by plain
  // loops, which the compiler vectorises; memcpy and fill calls on 4-16
  // floats cost more than the copy.
  // is_flat: a tap's row, over all oy, is one copy of a shifted run of the
  // plane; the columns that read the padding are zeroed after.
  const bool flat = is_flat(g);
  for (int64_t kr = 0; kr < g.r; ++kr) {
    const Range ys = valid_outputs(oh, g.h, g.stride_h, kr * g.dil_h - g.pad_h);
    for (int64_t ci = 0; ci < cg; ++ci) {
      const float* plane = xg + ci * g.h * g.w;
      for (int64_t ks = 0; ks < g.s; ++ks) {
        float* dst = col + ((ci * g.r + kr) * g.s + ks) * ld;
        const int64_t offw = ks * g.dil_w - g.pad_w;
        const Range xs = xs_of[static_cast<std::size_t>(ks)];
        for (int64_t i = 0; i < ys.lo * ow; ++i) dst[i] = 0.0f;
        if (flat && ys.lo < ys.hi && xs.lo < xs.hi) {
          // dst[oy·ow + ox] = plane[(oy + kr·dil_h − pad_h)·w + ox + offw] for every valid
          // (oy, ox), and ow == w: from the first valid element to the last, all in the plane.
          const float* from = plane + (ys.lo + kr * g.dil_h - g.pad_h) * g.w + xs.lo + offw;
          float* to = dst + ys.lo * ow + xs.lo;
          const int64_t run = (ys.hi - 1 - ys.lo) * ow + xs.hi - xs.lo;
          for (int64_t i = 0; i < run; ++i) to[i] = from[i];
          for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
            float* d = dst + oy * ow;
            for (int64_t ox = 0; ox < xs.lo; ++ox) d[ox] = 0.0f;
            for (int64_t ox = xs.hi; ox < ow; ++ox) d[ox] = 0.0f;
          }
        } else {
          for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
            const float* src = plane + (oy * g.stride_h + kr * g.dil_h - g.pad_h) * g.w;
            float* d = dst + oy * ow;
            for (int64_t ox = 0; ox < xs.lo; ++ox) d[ox] = 0.0f;
            if (g.stride_w == 1) {
              for (int64_t ox = xs.lo; ox < xs.hi; ++ox) d[ox] = src[ox + offw];
            } else {
              for (int64_t ox = xs.lo; ox < xs.hi; ++ox) d[ox] = src[ox * g.stride_w + offw];
            }
            for (int64_t ox = xs.hi; ox < ow; ++ox) d[ox] = 0.0f;
          }
        }
        for (int64_t i = ys.hi * ow; i < oh * ow; ++i) dst[i] = 0.0f;
      }
    }
  }
}

// dxg (cg, h, w) = or += the adjoint of im2col applied to dcol (row i at
// dcol + i·ld). `acc` holds w floats.
void col2im_gather(const ConvGeom& g, const float* dcol, int64_t ld, float* dxg, bool accumulate, float* acc) {
  const int64_t cg = g.c / g.groups, oh = g.oh(), ow = g.ow();
  const std::vector<Range> taps = column_taps(g);
  for (int64_t ci = 0; ci < cg; ++ci) {
    for (int64_t ih = 0; ih < g.h; ++ih) {
      std::fill(acc, acc + g.w, 0.0f);
      for (int64_t kr = 0; kr < g.r; ++kr) {
        const int64_t ty = ih + g.pad_h - kr * g.dil_h;  // = oy·stride_h
        if (ty < 0 || ty % g.stride_h != 0 || ty / g.stride_h >= oh) continue;
        const int64_t oy = ty / g.stride_h;
        for (int64_t ks = 0; ks < g.s; ++ks) {
          const float* src = dcol + ((ci * g.r + kr) * g.s + ks) * ld + oy * ow;
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

// col2im_gather for a stride-1 convolution as wide as its input (im2col's
// flat case): each tap's row, over all oy, adds into one shifted run of the
// plane, after its columns that read the padding are zeroed in dcol (which
// is done with). Every element still sums its taps in (kr, ks) order from
// +0, so the result is col2im_gather's bit for bit: a +0 added in passing
// changes no partial sum, none of which is −0. `acc` holds h·w floats.
void col2im_flat(const ConvGeom& g, float* dcol, int64_t ld, float* dxg, bool accumulate, float* acc) {
  const int64_t cg = g.c / g.groups, oh = g.oh(), ow = g.ow(), hw = g.h * g.w;
  // The taps that read the plane at all, with their valid ranges, once.
  struct Tap {
    int64_t row;                // (kr·s + ks): the tap's row of dcol within a channel
    Range ys, xs;
    int64_t to;                 // where its first valid output lands in the plane
  };
  const std::vector<Range> xs_of = column_taps(g);
  std::vector<Tap> taps;
  for (int64_t kr = 0; kr < g.r; ++kr) {
    const Range ys = valid_outputs(oh, g.h, 1, kr * g.dil_h - g.pad_h);
    for (int64_t ks = 0; ks < g.s; ++ks) {
      const Range xs = xs_of[static_cast<std::size_t>(ks)];
      if (ys.lo < ys.hi && xs.lo < xs.hi)
        taps.push_back({kr * g.s + ks, ys, xs,
                        (ys.lo + kr * g.dil_h - g.pad_h) * g.w + xs.lo + ks * g.dil_w - g.pad_w});
    }
  }
  for (int64_t ci = 0; ci < cg; ++ci) {
    for (int64_t i = 0; i < hw; ++i) acc[i] = 0.0f;
    for (const Tap& t : taps) {
      float* row = dcol + (ci * g.r * g.s + t.row) * ld;
      for (int64_t oy = t.ys.lo; oy < t.ys.hi; ++oy) {
        float* d = row + oy * ow;
        for (int64_t ox = 0; ox < t.xs.lo; ++ox) d[ox] = 0.0f;
        for (int64_t ox = t.xs.hi; ox < ow; ++ox) d[ox] = 0.0f;
      }
      const float* from = row + t.ys.lo * ow + t.xs.lo;
      float* to = acc + t.to;
      const int64_t run = (t.ys.hi - 1 - t.ys.lo) * ow + t.xs.hi - t.xs.lo;
      for (int64_t i = 0; i < run; ++i) to[i] += from[i];
    }
    float* plane = dxg + ci * hw;
    if (accumulate) {
      for (int64_t i = 0; i < hw; ++i) plane[i] += acc[i];
    } else {
      for (int64_t i = 0; i < hw; ++i) plane[i] = acc[i];
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

int64_t conv2d_images_per_gemm(const ConvGeom& g) {
  const int64_t ohw = g.oh() * g.ow();
  return std::clamp((kMinColumns + ohw - 1) / ohw, int64_t{1}, g.n);
}

int64_t conv2d_scratch_floats(const ConvGeom& g) {
  const int64_t K = (g.c / g.groups) * g.r * g.s, ohw = g.oh() * g.ow(), nb = conv2d_images_per_gemm(g);
  return nb == 1 ? K * ohw : (K + g.k / g.groups) * nb * ohw;
}

namespace {

// The (rows, ohw) blocks of images img0 .. img0+nb-1 that start at
// base + img·image_stride, side by side in a (rows, nb·ohw) matrix and back.
void gather_images(const float* base, int64_t image_stride, int64_t rows, int64_t ohw, int64_t nb, float* out) {
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out + i * nb * ohw + j * ohw, base + j * image_stride + i * ohw, sizeof(float) * ohw);
}
void scatter_images(const float* in, int64_t rows, int64_t ohw, int64_t nb, float* base, int64_t image_stride) {
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(base + j * image_stride + i * ohw, in + i * nb * ohw + j * ohw, sizeof(float) * ohw);
}

// The columns of images img0 .. img0+nb-1 of group grp, (K, nb·ohw), in
// scratch; or, for one pointwise image, that image itself.
const float* columns(const ConvGeom& g, const float* x, int64_t img0, int64_t nb, int64_t grp, float* scratch) {
  const int64_t cg = g.c / g.groups, ohw = g.oh() * g.ow(), hw = g.h * g.w;
  const float* xg = x + (img0 * g.c + grp * cg) * hw;
  if (!is_pointwise(g)) {
    const std::vector<Range> xs_of = column_taps(g);
    for (int64_t j = 0; j < nb; ++j) im2col(g, xs_of, xg + j * g.c * hw, scratch + j * ohw, nb * ohw);
    return scratch;
  }
  if (nb == 1) return xg;
  gather_images(xg, g.c * hw, cg, ohw, nb, scratch);
  return scratch;
}

}  // namespace

void conv2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y, float* scratch) {
  check_conv(g);
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, ohw = g.oh() * g.ow();
  const int64_t K = cg * g.r * g.s;  // GEMM depth
  const int64_t run = conv2d_images_per_gemm(g);
  float* out = scratch + K * run * ohw;  // a run's output rows, when run > 1
  for (int64_t img0 = 0; img0 < g.n; img0 += run) {
    const int64_t nb = std::min(run, g.n - img0);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* col = columns(g, x, img0, nb, grp, scratch);
      const ConstMat Wg(W + grp * kg * K, kg, K);
      float* yg = y + (img0 * g.k + grp * kg) * ohw;
      if (run == 1) {
        Mat(yg, kg, ohw).noalias() = Wg * ConstMat(col, K, ohw);
      } else {
        Mat(out, kg, nb * ohw).noalias() = Wg * ConstMat(col, K, nb * ohw);
        scatter_images(out, kg, ohw, nb, yg, g.k * ohw);
      }
    }
  }
  // The bias is added after the product, as in linear_fwd: the GEMM sees the
  // same problem whatever b holds.
  if (b != nullptr) {
    for (int64_t img = 0; img < g.n; ++img) {
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
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, ohw = g.oh() * g.ow(), hw = g.h * g.w;
  const int64_t K = cg * g.r * g.s;
  const int64_t run = conv2d_images_per_gemm(g);
  float* dy_run = scratch + K * run * ohw;  // a run's dy rows, when run > 1
  const bool flat = is_flat(g);
  std::vector<float> acc(dx == nullptr ? 0 : flat ? hw : g.w);  // a plane, or a row, of dx being gathered
  for (int64_t img0 = 0; img0 < g.n; img0 += run) {
    const int64_t nb = std::min(run, g.n - img0), cols = nb * ohw;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* dyg = dy + (img0 * g.k + grp * kg) * ohw;
      if (run > 1) {
        gather_images(dyg, g.k * ohw, kg, ohw, nb, dy_run);
        dyg = dy_run;
      }
      const ConstMat dY(dyg, kg, cols);
      // dW_g (kg, K) += dY_g · colᵀ; runs of images in order, so the sum is reproducible.
      if (dW != nullptr) {
        const float* col = columns(g, x, img0, nb, grp, scratch);
        Mat(dW + grp * kg * K, kg, K).noalias() += dY * ConstMat(col, K, cols).transpose();
      }
      if (dx == nullptr) continue;
      // dcol (K, cols) = W_gᵀ · dY_g overwrites the columns, which are done with.
      Mat(scratch, K, cols).noalias() = ConstMat(W + grp * kg * K, kg, K).transpose() * dY;
      for (int64_t j = 0; j < nb; ++j) {
        float* dxg = dx + ((img0 + j) * g.c + grp * cg) * hw;
        if (flat) col2im_flat(g, scratch + j * ohw, cols, dxg, accumulate, acc.data());
        else col2im_gather(g, scratch + j * ohw, cols, dxg, accumulate, acc.data());
      }
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
