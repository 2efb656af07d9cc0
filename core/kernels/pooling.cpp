// Max, average and global average pooling over NCHW planes. The backwards
// scatter each output's gradient, in increasing output order, into a zeroed
// plane, as PyTorch's CPU kernels do, so each input element's sum is formed
// in the same order from zero and agrees with PyTorch bit for bit. A backend
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

struct Range {
  int64_t lo, hi;
};

// The part of window o that lies inside the input, [start, end).
Range window(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t in_len) {
  const int64_t start = o * stride - pad;
  return {std::max<int64_t>(start, 0), std::min(start + k, in_len)};
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
  require_positive("kh", g.kh);
  require_positive("kw", g.kw);
  require_positive("stride_h", g.stride_h);
  require_positive("stride_w", g.stride_w);
  // PyTorch's own limit; it also guarantees every window holds an input element.
  if (g.pad_h < 0 || 2 * g.pad_h > g.kh)
    bad("pad_h = " + std::to_string(g.pad_h) + " must be in [0, kh/2] (kh = " + std::to_string(g.kh) + ")");
  if (g.pad_w < 0 || 2 * g.pad_w > g.kw)
    bad("pad_w = " + std::to_string(g.pad_w) + " must be in [0, kw/2] (kw = " + std::to_string(g.kw) + ")");
  if (g.h + 2 * g.pad_h < g.kh)
    bad("empty output: h + 2*pad_h = " + std::to_string(g.h + 2 * g.pad_h) + " is smaller than kh = " +
        std::to_string(g.kh));
  if (g.w + 2 * g.pad_w < g.kw)
    bad("empty output: w + 2*pad_w = " + std::to_string(g.w + 2 * g.pad_w) + " is smaller than kw = " +
        std::to_string(g.kw));
}

void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices) {
  check_pool(g);
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = x + plane * g.h * g.w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = window(oy, g.kh, g.stride_h, g.pad_h, g.h);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = window(ox, g.kw, g.stride_w, g.pad_w, g.w);
        // As PyTorch: strictly greater replaces (the first maximum wins), and a
        // NaN always does, so a NaN in the window propagates.
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_at = ys.lo * g.w + xs.lo;
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih) {
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) {
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
  check_pool(g);
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
  check_pool(g);
  const int64_t oh = g.oh(), ow = g.ow();
  // count_include_pad: the divisor is the whole window, kh·kw (windows never
  // pass the padded edge without ceil_mode).
  const float divisor = static_cast<float>(g.kh * g.kw);
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = x + plane * g.h * g.w;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = window(oy, g.kh, g.stride_h, g.pad_h, g.h);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = window(ox, g.kw, g.stride_w, g.pad_w, g.w);
        float sum = 0.0f;  // float, in window order, as PyTorch's CPU kernel
        for (int64_t ih = ys.lo; ih < ys.hi; ++ih)
          for (int64_t iw = xs.lo; iw < xs.hi; ++iw) sum += xp[ih * g.w + iw];
        y[plane * oh * ow + oy * ow + ox] = sum / divisor;
      }
    }
  }
}

void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate) {
  check_pool(g);
  const int64_t oh = g.oh(), ow = g.ow();
  const float divisor = static_cast<float>(g.kh * g.kw);
  plane_bwd(g, dx, accumulate, [&](int64_t plane, float* out) {
    const float* dyp = dy + plane * oh * ow;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const Range ys = window(oy, g.kh, g.stride_h, g.pad_h, g.h);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const Range xs = window(ox, g.kw, g.stride_w, g.pad_w, g.w);
        const float share = dyp[oy * ow + ox] / divisor;
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
