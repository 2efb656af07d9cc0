// Max (dilated or not), average (adaptive or not) and global average pooling
// over NCHW planes, ceil_mode included, with PyTorch's windows and divisors.
// The backwards scatter each output's gradient, in increasing output order,
// into a zeroed plane, as PyTorch's CPU kernels do, so each input element's
// sum is formed in the same order from zero and agrees with PyTorch bit for
// bit. A backend
// that gathers instead (each input summing the windows that cover it, in
// increasing output order: no atomics) gets the same bits. With accumulate ==
// true the plane is formed aside and then added, so the result is exactly dx
// plus the fresh gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/reduce.h"

namespace remat::cpu {
namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("pool: " + what); }

void require_positive(const char* field, int64_t v) {
  if (v <= 0) bad(std::string(field) + " must be positive (got " + std::to_string(v) + ")");
}

// One axis of a window: the input positions lo, lo + step, ... below hi, and
// the length its average divides by.
struct Range {
  int64_t lo, hi, step, count;
};

// The axes' geometry, so that one function serves h and w.
struct Axis {
  int64_t in, k, stride, pad, dil, adaptive_out;
};
Axis axis_h(const PoolGeom& g) { return {g.h, g.kh, g.stride_h, g.pad_h, g.dil_h, g.out_h}; }
Axis axis_w(const PoolGeom& g) { return {g.w, g.kw, g.stride_w, g.pad_w, g.dil_w, g.out_w}; }

// Max window o, as PyTorch's: from its start in the padded input, by the
// dilation, the positions inside the input.
Range max_window(const Axis& a, int64_t o) {
  int64_t lo = o * a.stride - a.pad;
  const int64_t hi = std::min(lo + (a.k - 1) * a.dil + 1, a.in);
  while (lo < 0) lo += a.dil;
  return {lo, hi, a.dil, 0};
}

// Average window o: the part inside the input, and the divisor's length:
// PyTorch's window clipped to the padded input (count_include_pad, which
// ceil_mode's last window may pass), the part inside the input otherwise,
// and adaptive pooling's [floor(o·in/out), ceil((o+1)·in/out)).
Range avg_window(const Axis& a, int64_t o, bool count_include_pad) {
  if (a.adaptive_out > 0) {
    const int64_t lo = o * a.in / a.adaptive_out, hi = ((o + 1) * a.in + a.adaptive_out - 1) / a.adaptive_out;
    return {lo, hi, 1, hi - lo};
  }
  const int64_t start = o * a.stride - a.pad, end = std::min(start + a.k, a.in + a.pad);
  const int64_t lo = std::max<int64_t>(start, 0), hi = std::min(end, a.in);
  return {lo, hi, 1, count_include_pad ? end - start : hi - lo};
}

// dy / divisor, as PyTorch divides: adaptive pooling by one axis's length, then
// the other's; the others by the product.
float averaged(const PoolGeom& g, float v, const Range& ys, const Range& xs) {
  if (g.adaptive()) return v / static_cast<float>(ys.count) / static_cast<float>(xs.count);
  return v / static_cast<float>(ys.count * xs.count);
}

// For every plane: zero `out` (h·w floats), let scatter(plane, out) add the
// plane's gradient into it, then store it in dx or add it to dx.
template <class Scatter>
void plane_bwd(const PoolGeom& g, float* dx, bool accumulate, Scatter scatter) {
  const int64_t hw = g.h * g.w;
  std::vector<float> aside(accumulate ? hw : 0);
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    float* dxp = dx + plane * hw;
    float* out = accumulate ? aside.data() : dxp;
    std::fill(out, out + hw, 0.0f);
    scatter(plane, out);
    if (accumulate) {
      for (int64_t i = 0; i < hw; ++i) dxp[i] += out[i];
    }
  }
}

}  // namespace

void check_pool(const PoolGeom& g) {
  require_positive("n", g.n);
  require_positive("c", g.c);
  require_positive("h", g.h);
  require_positive("w", g.w);
  if (g.adaptive()) {
    require_positive("out_w", g.out_w);
    return;
  }
  if (g.out_w != 0) bad("out_w = " + std::to_string(g.out_w) + " without out_h (adaptive pooling needs both)");
  require_positive("kh", g.kh);
  require_positive("kw", g.kw);
  require_positive("stride_h", g.stride_h);
  require_positive("stride_w", g.stride_w);
  require_positive("dil_h", g.dil_h);
  require_positive("dil_w", g.dil_w);
  // PyTorch's own limit; it also guarantees every window holds an input element.
  if (g.pad_h < 0 || 2 * g.pad_h > g.kh)
    bad("pad_h = " + std::to_string(g.pad_h) + " must be in [0, kh/2] (kh = " + std::to_string(g.kh) + ")");
  if (g.pad_w < 0 || 2 * g.pad_w > g.kw)
    bad("pad_w = " + std::to_string(g.pad_w) + " must be in [0, kw/2] (kw = " + std::to_string(g.kw) + ")");
  const int64_t span_h = g.dil_h * (g.kh - 1) + 1, span_w = g.dil_w * (g.kw - 1) + 1;
  if (g.h + 2 * g.pad_h < span_h)
    bad("empty output: h + 2*pad_h = " + std::to_string(g.h + 2 * g.pad_h) + " is smaller than the window, " +
        std::to_string(span_h));
  if (g.w + 2 * g.pad_w < span_w)
    bad("empty output: w + 2*pad_w = " + std::to_string(g.w + 2 * g.pad_w) + " is smaller than the window, " +
        std::to_string(span_w));
}

void check_max(const PoolGeom& g) {
  check_pool(g);
  if (g.adaptive()) bad("max pooling is not adaptive (out_h = " + std::to_string(g.out_h) + ")");
}

void check_avg(const PoolGeom& g) {
  check_pool(g);
  if (g.dil_h != 1 || g.dil_w != 1) bad("average pooling takes no dilation");
}

void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices) {
  check_max(g);
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = x + plane * g.h * g.w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = max_window(axis_h(g), oy);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = max_window(axis_w(g), ox);
        // As PyTorch: strictly greater replaces (the first maximum wins), and a
        // NaN always does, so a NaN in the window propagates.
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_at = ys.lo * g.w + xs.lo;
        for (int64_t ih = ys.lo; ih < ys.hi; ih += ys.step) {
          for (int64_t iw = xs.lo; iw < xs.hi; iw += xs.step) {
            const float v = xp[ih * g.w + iw];
            if (v > best || std::isnan(v)) {
              best = v;
              best_at = ih * g.w + iw;
            }
          }
        }
        y[plane * oh * ow + oy * ow + ox] = best;
        indices[plane * oh * ow + oy * ow + ox] = best_at;
      }
    }
  }
}

void maxpool2d_bwd(const PoolGeom& g, const float* dy, const int64_t* indices, float* dx, bool accumulate) {
  check_max(g);
  const int64_t ohw = g.oh() * g.ow(), hw = g.h * g.w;
  plane_bwd(g, dx, accumulate, [&](int64_t plane, float* out) {
    const float* dyp = dy + plane * ohw;
    const int64_t* ip = indices + plane * ohw;
    for (int64_t o = 0; o < ohw; ++o) {
      // Indices come from maxpool2d_fwd; one outside the plane is a caller's bug
      // that must not become a write elsewhere.
      if (ip[o] < 0 || ip[o] >= hw) {
        throw std::invalid_argument("maxpool2d_bwd: index " + std::to_string(ip[o]) + " outside the " +
                                    std::to_string(g.h) + "x" + std::to_string(g.w) + " plane");
      }
      out[ip[o]] += dyp[o];
    }
  });
}

void avgpool2d_fwd(const PoolGeom& g, const float* x, float* y) {
  check_avg(g);
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = x + plane * g.h * g.w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = avg_window(axis_h(g), oy, g.count_include_pad);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = avg_window(axis_w(g), ox, g.count_include_pad);
        float sum = 0.0f;  // float, in window order, as PyTorch's CPU kernel
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih)
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) sum += xp[ih * g.w + iw];
        // A window with no input element (only where a caller's geometry
        // allows one) is 0, as PyTorch leaves it.
        y[plane * oh * ow + oy * ow + ox] = ys.lo < ys.hi && xs.lo < xs.hi ? averaged(g, sum, ys, xs) : 0.0f;
      }
    }
  }
}

void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate) {
  check_avg(g);
  const int64_t oh = g.oh(), ow = g.ow();
  plane_bwd(g, dx, accumulate, [&](int64_t plane, float* out) {
    const float* dyp = dy + plane * oh * ow;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = avg_window(axis_h(g), oy, g.count_include_pad);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = avg_window(axis_w(g), ox, g.count_include_pad);
        if (ys.lo >= ys.hi || xs.lo >= xs.hi) continue;
        const float share = averaged(g, dyp[oy * ow + ox], ys, xs);
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih)
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) out[ih * g.w + iw] += share;
      }
    }
  });
}

void global_avgpool_fwd(const float* x, float* y, int64_t nc, int64_t hw) {
  for (int64_t p = 0; p < nc; ++p) y[p] = static_cast<float>(sum_f64(x + p * hw, hw) / static_cast<double>(hw));
}

void global_avgpool_bwd(const float* dy, float* dx, int64_t nc, int64_t hw, bool accumulate) {
  const float count = static_cast<float>(hw);
  for (int64_t p = 0; p < nc; ++p) {
    const float v = dy[p] / count;
    float* dxp = dx + p * hw;
    if (accumulate) {
      for (int64_t i = 0; i < hw; ++i) dxp[i] += v;
    } else {
      std::fill(dxp, dxp + hw, v);
    }
  }
}

}  // namespace remat::cpu
