// Nearest and bilinear resizing of (planes, ih, iw) to (planes, oh, ow), with
// PyTorch's source coordinates (aten/src/ATen/native/UpSample.h): nearest
// reads floor(o·in/out) (the legacy 'nearest'), bilinear blends the two
// neighbours of (o + 0.5)·in/out − 0.5 (clamped at 0), or of o·(in−1)/(out−1)
// with align_corners, in float as PyTorch's CPU kernel. A 1-D op is ih = oh = 1.
// The backward adds each output's gradient into the inputs it read, in output
// order: the same bits on every run.
#include <algorithm>
#include <cmath>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {

UpsampleTap upsample_tap(int64_t o, int64_t in, int64_t out, bool bilinear, bool align_corners) {
  UpsampleTap t;
  if (!bilinear) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    t.i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    t.i1 = t.i0;
    t.w0 = 1.0f;
    t.w1 = 0.0f;
    return t;
  }
  float src;
  if (align_corners) {
    const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    src = scale * static_cast<float>(o);
  } else {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    src = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
  }
  t.i0 = std::min(static_cast<int64_t>(src), in - 1);
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.w1 = src - static_cast<float>(t.i0);
  t.w0 = 1.0f - t.w1;
  return t;
}

void upsample_fwd(const float* x, float* y, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    const UpsampleTap ty = upsample_tap(oy, ih, oh, bilinear, align_corners);
    for (int64_t ox = 0; ox < ow; ++ox) {
      const UpsampleTap tx = upsample_tap(ox, iw, ow, bilinear, align_corners);
      for (int64_t p = 0; p < planes; ++p) {
        const float* xp = x + p * ih * iw;
        float v;
        if (!bilinear) {
          v = xp[ty.i0 * iw + tx.i0];
        } else {
          v = ty.w0 * (tx.w0 * xp[ty.i0 * iw + tx.i0] + tx.w1 * xp[ty.i0 * iw + tx.i1]) +
              ty.w1 * (tx.w0 * xp[ty.i1 * iw + tx.i0] + tx.w1 * xp[ty.i1 * iw + tx.i1]);
        }
        y[(p * oh + oy) * ow + ox] = v;
      }
    }
  }
}

void upsample_bwd(const float* dy, float* dx, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, bool accumulate) {
  if (!accumulate) std::fill(dx, dx + planes * ih * iw, 0.0f);
  for (int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * ih * iw;
    for (int64_t oy = 0; oy < oh; ++oy) {
      const UpsampleTap ty = upsample_tap(oy, ih, oh, bilinear, align_corners);
      for (int64_t ox = 0; ox < ow; ++ox) {
        const UpsampleTap tx = upsample_tap(ox, iw, ow, bilinear, align_corners);
        const float g = dy[(p * oh + oy) * ow + ox];
        if (!bilinear) {
          dxp[ty.i0 * iw + tx.i0] += g;
          continue;
        }
        dxp[ty.i0 * iw + tx.i0] += ty.w0 * tx.w0 * g;
        dxp[ty.i0 * iw + tx.i1] += ty.w0 * tx.w1 * g;
        dxp[ty.i1 * iw + tx.i0] += ty.w1 * tx.w0 * g;
        dxp[ty.i1 * iw + tx.i1] += ty.w1 * tx.w1 * g;
      }
    }
  }
}

}  // namespace remat::cpu
