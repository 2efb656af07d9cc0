// Pooling over NCHW planes (cpu_kernels.h: PoolGeom): max with PyTorch-style
// indices (flat within the input plane), average counting the padding, and the
// global average. The backward passes gather: each input element sums, in
// window order, the windows that chose it (max) or cover it (average), so no
// two threads write one element and no atomics decide an order.
#include <cmath>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

struct Geom {  // PoolGeom with its output size, for the device
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

Geom device_geom(const PoolGeom& g) {
  return {g.n, g.c, g.h, g.w, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.oh(), g.ow()};
}

// The outputs along one axis whose windows cover input position i: [first, last].
__device__ __forceinline__ void covering(int64_t i, int64_t pad, int64_t k, int64_t stride, int64_t out,
                                         int64_t& first, int64_t& last) {
  const int64_t hi = i + pad;  // position in the padded input
  first = hi < k ? 0 : (hi - k) / stride + 1;
  last = hi / stride;
  if (last > out - 1) last = out - 1;
}

// Input element i of the whole (n, c, h, w) tensor: its own flat index in its
// plane, where its plane's outputs start, and the output rectangle covering it.
struct Cover {
  int64_t self, base, y0, y1, x0, x1;
};
__device__ __forceinline__ Cover cover(const Geom& g, int64_t i) {
  const int64_t plane = i / (g.h * g.w), iy = (i / g.w) % g.h, ix = i % g.w;
  Cover c{iy * g.w + ix, plane * g.oh * g.ow, 0, 0, 0, 0};
  covering(iy, g.ph, g.kh, g.sh, g.oh, c.y0, c.y1);
  covering(ix, g.pw, g.kw, g.sw, g.ow, c.x0, c.x1);
  return c;
}

// ---- kernels ------------------------------------------------------------------

__global__ void maxpool_fwd_kernel(Geom g, const float* x, float* y, int64_t* indices) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = o / (g.oh * g.ow), oy = (o / g.ow) % g.oh, ox = o % g.ow;
    const float* xp = x + plane * g.h * g.w;
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.sh - g.ph + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = ox * g.sw - g.pw + kx;
        if (ix < 0 || ix >= g.w) continue;
        const float v = xp[iy * g.w + ix];
        if (at < 0 || v > best || isnan(v)) {  // the first maximum wins; a NaN wins, as in PyTorch
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
    const Cover c = cover(g, i);
    float sum = 0.0f;
    for (int64_t oy = c.y0; oy <= c.y1; ++oy)
      for (int64_t ox = c.x0; ox <= c.x1; ++ox)
        if (indices[c.base + oy * g.ow + ox] == c.self) sum += dy[c.base + oy * g.ow + ox];
    detail::store_grad(&dx[i], sum, accumulate);
  }
}

__global__ void avgpool_fwd_kernel(Geom g, const float* x, float* y) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  // Divided, not multiplied by 1/(kh·kw), as the CPU does: the same bits
  // (a product by the reciprocal differs in the last bit for 3x3 windows).
  const float divisor = static_cast<float>(g.kh * g.kw);
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t plane = o / (g.oh * g.ow), oy = (o / g.ow) % g.oh, ox = o % g.ow;
    const float* xp = x + plane * g.h * g.w;
    float sum = 0.0f;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.sh - g.ph + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = ox * g.sw - g.pw + kx;
        if (ix >= 0 && ix < g.w) sum += xp[iy * g.w + ix];
      }
    }
    y[o] = sum / divisor;
  }
}

__global__ void avgpool_bwd_kernel(Geom g, const float* dy, float* dx, bool accumulate) {
  const int64_t total = g.n * g.c * g.h * g.w;
  const float divisor = static_cast<float>(g.kh * g.kw);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Cover c = cover(g, i);
    float sum = 0.0f;
    for (int64_t oy = c.y0; oy <= c.y1; ++oy)
      for (int64_t ox = c.x0; ox <= c.x1; ++ox) sum += dy[c.base + oy * g.ow + ox] / divisor;
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

void check(const char* fn, const PoolGeom& g) {
  try {
    remat::cpu::check_pool(g);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(fn) + ": " + e.what());
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices, cudaStream_t stream) {
  check("maxpool2d_fwd", g);
  const Geom d = device_geom(g);
  maxpool_fwd_kernel<<<detail::grid_for(d.n * d.c * d.oh * d.ow), kBlock, 0, stream>>>(d, x, y, indices);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void maxpool2d_bwd(const PoolGeom& g, const float* dy, const int64_t* indices, float* dx, bool accumulate,
                   cudaStream_t stream) {
  check("maxpool2d_bwd", g);
  const Geom d = device_geom(g);
  maxpool_bwd_kernel<<<detail::grid_for(d.n * d.c * d.h * d.w), kBlock, 0, stream>>>(d, dy, indices, dx,
                                                                                      accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void avgpool2d_fwd(const PoolGeom& g, const float* x, float* y, cudaStream_t stream) {
  check("avgpool2d_fwd", g);
  const Geom d = device_geom(g);
  avgpool_fwd_kernel<<<detail::grid_for(d.n * d.c * d.oh * d.ow), kBlock, 0, stream>>>(d, x, y);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream) {
  check("avgpool2d_bwd", g);
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
