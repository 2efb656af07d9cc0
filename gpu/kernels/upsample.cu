// Nearest and bilinear resizing (cpu_kernels.h: upsample_fwd/bwd), with the
// CPU's source coordinates and weights (float, no fused multiply-adds). The
// backward gathers: one thread per input element adds, in output order, the
// gradient of every output that read it, as the CPU's scatter adds them, so
// no atomics and the same bits on every run.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

struct Tap {
  int64_t i0, i1;
  float w0, w1;
};

__device__ Tap tap(int64_t o, int64_t in, int64_t out, bool bilinear, bool align_corners) {
  Tap t;
  if (!bilinear) {
    const float scale = __fdiv_rn(static_cast<float>(in), static_cast<float>(out));
    t.i0 = min(static_cast<int64_t>(floorf(__fmul_rn(static_cast<float>(o), scale))), in - 1);
    t.i1 = t.i0;
    t.w0 = 1.0f;
    t.w1 = 0.0f;
    return t;
  }
  float src;
  if (align_corners) {
    const float scale = out > 1 ? __fdiv_rn(static_cast<float>(in - 1), static_cast<float>(out - 1)) : 0.0f;
    src = __fmul_rn(scale, static_cast<float>(o));
  } else {
    const float scale = __fdiv_rn(static_cast<float>(in), static_cast<float>(out));
    src = fmaxf(__fsub_rn(__fmul_rn(scale, __fadd_rn(static_cast<float>(o), 0.5f)), 0.5f), 0.0f);
  }
  t.i0 = min(static_cast<int64_t>(src), in - 1);
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.w1 = __fsub_rn(src, static_cast<float>(t.i0));
  t.w0 = __fsub_rn(1.0f, t.w1);
  return t;
}

__global__ void upsample_fwd_kernel(const float* x, float* y, int64_t planes, int64_t ih, int64_t iw, int64_t oh,
                                    int64_t ow, bool bilinear, bool align_corners) {
  const int64_t total = planes * oh * ow;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ox = e % ow, oy = (e / ow) % oh, p = e / (ow * oh);
    const Tap ty = tap(oy, ih, oh, bilinear, align_corners), tx = tap(ox, iw, ow, bilinear, align_corners);
    const float* xp = x + p * ih * iw;
    if (!bilinear) {
      y[e] = xp[ty.i0 * iw + tx.i0];
      continue;
    }
    const float top = __fadd_rn(__fmul_rn(tx.w0, xp[ty.i0 * iw + tx.i0]), __fmul_rn(tx.w1, xp[ty.i0 * iw + tx.i1]));
    const float bottom = __fadd_rn(__fmul_rn(tx.w0, xp[ty.i1 * iw + tx.i0]), __fmul_rn(tx.w1, xp[ty.i1 * iw + tx.i1]));
    y[e] = __fadd_rn(__fmul_rn(ty.w0, top), __fmul_rn(ty.w1, bottom));
  }
}

// The outputs along one dimension whose taps may reach input i: a window
// around i·out/in wide enough for any rounding of the source coordinate.
__device__ void window(int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  const double r = static_cast<double>(out) / static_cast<double>(in);
  lo = static_cast<int64_t>(floor((static_cast<double>(i) - 1.0) * r)) - 2;
  hi = static_cast<int64_t>(ceil((static_cast<double>(i) + 2.0) * r)) + 2;
  lo = lo < 0 ? 0 : lo;
  hi = hi > out ? out : hi;
}

__global__ void upsample_bwd_kernel(const float* dy, float* dx, int64_t planes, int64_t ih, int64_t iw, int64_t oh,
                                    int64_t ow, bool bilinear, bool align_corners, bool accumulate) {
  const int64_t total = planes * ih * iw;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ix = e % iw, iy = (e / iw) % ih, p = e / (iw * ih);
    int64_t ylo, yhi, xlo, xhi;
    window(iy, ih, oh, ylo, yhi);
    window(ix, iw, ow, xlo, xhi);
    const float* dyp = dy + p * oh * ow;
    float acc = accumulate ? dx[e] : 0.0f;
    for (int64_t oy = ylo; oy < yhi; ++oy) {
      const Tap ty = tap(oy, ih, oh, bilinear, align_corners);
      if (ty.i0 != iy && ty.i1 != iy) continue;
      for (int64_t ox = xlo; ox < xhi; ++ox) {
        const Tap tx = tap(ox, iw, ow, bilinear, align_corners);
        if (tx.i0 != ix && tx.i1 != ix) continue;
        const float g = dyp[oy * ow + ox];
        if (!bilinear) {
          acc = __fadd_rn(acc, g);
          continue;
        }
        // The CPU's four adds, in its order.
        if (ty.i0 == iy && tx.i0 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(ty.w0, tx.w0), g));
        if (ty.i0 == iy && tx.i1 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(ty.w0, tx.w1), g));
        if (ty.i1 == iy && tx.i0 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(ty.w1, tx.w0), g));
        if (ty.i1 == iy && tx.i1 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(ty.w1, tx.w1), g));
      }
    }
    dx[e] = acc;
  }
}

}  // namespace

void upsample_fwd(const float* x, float* y, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, cudaStream_t stream) {
  detail::check_sizes("upsample_fwd", {planes, ih, iw, oh, ow});
  const int64_t total = planes * oh * ow;
  if (total == 0) return;
  upsample_fwd_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(x, y, planes, ih, iw, oh, ow, bilinear,
                                                                              align_corners);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void upsample_bwd(const float* dy, float* dx, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, bool accumulate, cudaStream_t stream) {
  detail::check_sizes("upsample_bwd", {planes, ih, iw, oh, ow});
  const int64_t total = planes * ih * iw;
  if (total == 0) return;
  upsample_bwd_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(dy, dx, planes, ih, iw, oh, ow,
                                                                              bilinear, align_corners, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
