// Pooling over NCHW planes (cpu_kernels.h: PoolGeom): max with PyTorch-style
// indices (flat within the input plane) and dilation, average (the padding
// counted or not, or adaptive), ceil_mode included, and the global average,
// with the CPU's windows and divisors. The backward passes gather: each input
// element sums, in increasing output order, the windows that chose it (max) or
// cover it (average), so no two threads write one element, no atomics decide
// an order, and the sums are the CPU's scatter's.
#include <cmath>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

struct Geom {  // PoolGeom with its output size, for the device
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  bool count_include_pad, adaptive;
};

Geom device_geom(const PoolGeom& g) {
  return {g.n,     g.c,     g.h,     g.w,     g.kh,   g.kw,   g.stride_h,          g.stride_w,
          g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.oh(), g.ow(), g.count_include_pad, g.adaptive()};
}

// One axis of window o (pooling.cpp's Range): the input positions lo, lo +
// step, ... below hi, and the length an average divides by.
struct Span {
  int64_t lo, hi, step, count;
};

__device__ __forceinline__ Span max_span(int64_t o, int64_t in, int64_t k, int64_t stride, int64_t pad,
                                         int64_t dil) {
  int64_t lo = o * stride - pad;
  const int64_t end = lo + (k - 1) * dil + 1;
  const int64_t hi = end < in ? end : in;
  while (lo < 0) lo += dil;
  return {lo, hi, dil, 0};
}

// Average window o: PyTorch's window clipped to the padded input
// (count_include_pad) or to the input, or adaptive pooling's
// [floor(o·in/out), ceil((o+1)·in/out)).
__device__ __forceinline__ Span avg_span(const Geom& g, bool h_axis, int64_t o) {
  const int64_t in = h_axis ? g.h : g.w, out = h_axis ? g.oh : g.ow;
  if (g.adaptive) {
    const int64_t lo = o * in / out, hi = ((o + 1) * in + out - 1) / out;
    return {lo, hi, 1, hi - lo};
  }
  const int64_t k = h_axis ? g.kh : g.kw, pad = h_axis ? g.ph : g.pw;
  const int64_t start = o * (h_axis ? g.sh : g.sw) - pad;
  const int64_t end = start + k < in + pad ? start + k : in + pad;
  const int64_t lo = start > 0 ? start : 0, hi = end < in ? end : in;
  return {lo, hi, 1, g.count_include_pad ? end - start : hi - lo};
}

// v / divisor as the CPU divides: adaptive by one axis's length, then the
// other's; otherwise by the product. Divided, not multiplied by a reciprocal:
// the same bits (a product by 1/9 differs in the last bit).
__device__ __forceinline__ float averaged(const Geom& g, float v, const Span& ys, const Span& xs) {
  if (g.adaptive) return v / static_cast<float>(ys.count) / static_cast<float>(xs.count);
  return v / static_cast<float>(ys.count * xs.count);
}

// The outputs along one axis whose windows may cover input position i:
// [first, last]. Windows of span `extent` (the dilated kernel) in the padded
// input; adaptive windows exactly those with floor(o·in/out) <= i < ceil((o+1)·in/out).
__device__ __forceinline__ void covering(int64_t i, int64_t pad, int64_t extent, int64_t stride, int64_t out,
                                         int64_t& first, int64_t& last) {
  const int64_t hi = i + pad;  // position in the padded input
  first = hi < extent ? 0 : (hi - extent) / stride + 1;
  last = hi / stride;
  if (last > out - 1) last = out - 1;
}
__device__ __forceinline__ void covering_adaptive(int64_t i, int64_t in, int64_t out, int64_t& first,
                                                  int64_t& last) {
  first = i * out / in;
  last = ((i + 1) * out + in - 1) / in - 1;
}

// Input element i of the whole (n, c, h, w) tensor: its own flat index in its
// plane, where its plane's outputs start, and the output rectangle that may
// cover it.
struct Cover {
  int64_t self, base, iy, ix, y0, y1, x0, x1;
};
__device__ __forceinline__ Cover cover(const Geom& g, int64_t i, bool dilated) {
  const int64_t plane = i / (g.h * g.w), iy = (i / g.w) % g.h, ix = i % g.w;
  Cover c{iy * g.w + ix, plane * g.oh * g.ow, iy, ix, 0, 0, 0, 0};
  if (g.adaptive) {
    covering_adaptive(iy, g.h, g.oh, c.y0, c.y1);
    covering_adaptive(ix, g.w, g.ow, c.x0, c.x1);
    return c;
  }
  const int64_t eh = dilated ? (g.kh - 1) * g.dh + 1 : g.kh, ew = dilated ? (g.kw - 1) * g.dw + 1 : g.kw;
  covering(iy, g.ph, eh, g.sh, g.oh, c.y0, c.y1);
  covering(ix, g.pw, ew, g.sw, g.ow, c.x0, c.x1);
  return c;
}

// ---- kernels ------------------------------------------------------------------

__global__ void maxpool_fwd_kernel(Geom g, const float* x, float* y, int64_t* indices) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = o / (g.oh * g.ow), oy = (o / g.ow) % g.oh, ox = o % g.ow;
    const float* xp = x + plane * g.h * g.w;
    const Span ys = max_span(oy, g.h, g.kh, g.sh, g.ph, g.dh), xs = max_span(ox, g.w, g.kw, g.sw, g.pw, g.dw);
    float best = -INFINITY;
    int64_t at = ys.lo * g.w + xs.lo;  // PyTorch's index when nothing beats -inf
    for (int64_t iy = ys.lo; iy < ys.hi; iy += ys.step) {
      for (int64_t ix = xs.lo; ix < xs.hi; ix += xs.step) {
        const float v = xp[iy * g.w + ix];
        if (v > best || isnan(v)) {  // the first maximum wins; a NaN wins, as in PyTorch
          best = v;
          at = iy * g.w + ix;
        }
      }
    }
    y[o] = best;
    indices[o] = at;
  }
}

__global__ void maxpool_bwd_kernel(Geom g, const float* dy, const int64_t* indices, float* dx, bool accumulate) {
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Cover c = cover(g, i, true);
    float sum = 0.0f;
    for (int64_t oy = c.y0; oy <= c.y1; ++oy)
      for (int64_t ox = c.x0; ox <= c.x1; ++ox)
        if (indices[c.base + oy * g.ow + ox] == c.self) sum += dy[c.base + oy * g.ow + ox];
    detail::store_grad(&dx[i], sum, accumulate);
  }
}

__global__ void avgpool_fwd_kernel(Geom g, const float* x, float* y) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = o / (g.oh * g.ow), oy = (o / g.ow) % g.oh, ox = o % g.ow;
    const float* xp = x + plane * g.h * g.w;
    const Span ys = avg_span(g, true, oy), xs = avg_span(g, false, ox);
    float sum = 0.0f;
    for (int64_t iy = ys.lo; iy < ys.hi; ++iy)
      for (int64_t ix = xs.lo; ix < xs.hi; ++ix) sum += xp[iy * g.w + ix];
    y[o] = ys.lo < ys.hi && xs.lo < xs.hi ? averaged(g, sum, ys, xs) : 0.0f;
  }
}

__global__ void avgpool_bwd_kernel(Geom g, const float* dy, float* dx, bool accumulate) {
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Cover c = cover(g, i, false);
    float sum = 0.0f;
    for (int64_t oy = c.y0; oy <= c.y1; ++oy) {
      const Span ys = avg_span(g, true, oy);
      if (c.iy < ys.lo || c.iy >= ys.hi) continue;
      for (int64_t ox = c.x0; ox <= c.x1; ++ox) {
        const Span xs = avg_span(g, false, ox);
        if (c.ix < xs.lo || c.ix >= xs.hi) continue;
        sum += averaged(g, dy[c.base + oy * g.ow + ox], ys, xs);
      }
    }
    detail::store_grad(&dx[i], sum, accumulate);
  }
}

// y (nc) = mean of each plane of hw values: one block per plane.
__global__ void global_avgpool_fwd_kernel(const float* x, float* y, int64_t nc, int64_t hw) {
  __shared__ float shared[32];
  for (int64_t p = blockIdx.x; p < nc; p += gridDim.x) {
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) sum += x[p * hw + j];
    sum = detail::block_sum(sum, shared);
    if (threadIdx.x == 0) y[p] = sum / static_cast<float>(hw);
  }
}

__global__ void global_avgpool_bwd_kernel(const float* dy, float* dx, int64_t nc, int64_t hw, bool accumulate) {
  const int64_t total = nc * hw;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&dx[i], dy[i / hw] / static_cast<float>(hw), accumulate);
}

void check(const char* fn, const PoolGeom& g, void (*rule)(const PoolGeom&)) {
  try {
    rule(g);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(fn) + ": " + e.what());
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices, cudaStream_t stream) {
  check("maxpool2d_fwd", g, remat::cpu::check_max);
  const Geom d = device_geom(g);
  maxpool_fwd_kernel<<<detail::grid_for(d.n * d.c * d.oh * d.ow), kBlock, 0, stream>>>(d, x, y, indices);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void maxpool2d_bwd(const PoolGeom& g, const float* dy, const int64_t* indices, float* dx, bool accumulate,
                   cudaStream_t stream) {
  check("maxpool2d_bwd", g, remat::cpu::check_max);
  const Geom d = device_geom(g);
  maxpool_bwd_kernel<<<detail::grid_for(d.n * d.c * d.h * d.w), kBlock, 0, stream>>>(d, dy, indices, dx,
                                                                                      accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void avgpool2d_fwd(const PoolGeom& g, const float* x, float* y, cudaStream_t stream) {
  check("avgpool2d_fwd", g, remat::cpu::check_avg);
  const Geom d = device_geom(g);
  avgpool_fwd_kernel<<<detail::grid_for(d.n * d.c * d.oh * d.ow), kBlock, 0, stream>>>(d, x, y);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream) {
  check("avgpool2d_bwd", g, remat::cpu::check_avg);
  const Geom d = device_geom(g);
  avgpool_bwd_kernel<<<detail::grid_for(d.n * d.c * d.h * d.w), kBlock, 0, stream>>>(d, dy, dx, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void global_avgpool_fwd(const float* x, float* y, int64_t nc, int64_t hw, cudaStream_t stream) {
  detail::check_sizes("global_avgpool_fwd", {nc, hw});
  if (nc == 0) return;
  if (hw == 0) throw std::invalid_argument("global_avgpool_fwd: empty planes (hw = 0)");
  const unsigned grid = static_cast<unsigned>(nc < detail::kMaxBlocks ? nc : detail::kMaxBlocks);
  global_avgpool_fwd_kernel<<<grid, kBlock, 0, stream>>>(x, y, nc, hw);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void global_avgpool_bwd(const float* dy, float* dx, int64_t nc, int64_t hw, bool accumulate, cudaStream_t stream) {
  detail::check_sizes("global_avgpool_bwd", {nc, hw});
  if (nc * hw == 0) return;
  global_avgpool_bwd_kernel<<<detail::grid_for(nc * hw), kBlock, 0, stream>>>(dy, dx, nc, hw, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
