// Batch normalisation in training mode over x (n, c, hw): each channel's n·hw
// values are reduced with fixed trees in double (two passes: the mean, then the
// centred squares), by one block per channel or, with a buffer for partial
// sums, by several blocks a channel (below), so results are bit-identical from
// run to run and recomputation changes nothing (on the grid-wide path a thread
// adds its elements in kUnroll sums, loaded together, then those in order).
// gamma/beta may be null
// (affine=False). Threads walk a channel with a ChannelWalk (channel_walk.h):
// no 64-bit division per element. The kernels are templates on how x, y, dy
// and dx are stored (lowp_io.cuh): f32 pointers for batchnorm_fwd/bwd,
// bf16/f16 tensors as stored for the *_io launchers of mixed precision, which
// compute the same values from the same (exactly widened) inputs and store
// them as the widening call would (docs/gpu.md#16-bit-loads-and-stores).
#include <cmath>

#include "gpu/kernels/channel_walk.h"
#include "gpu/kernels/device_common.cuh"
#include "gpu/kernels/lowp_io.cuh"

namespace remat::cuda {
namespace {

using detail::ChannelWalk;
using detail::ld;
using detail::st;

constexpr int kChannelBlock = 256;

unsigned channel_grid(int64_t c) {
  return static_cast<unsigned>(c < detail::kMaxBlocks ? c : detail::kMaxBlocks);
}

// ---- kernels ------------------------------------------------------------------

// Whether a gradient is wanted (a null dx is not written).
__device__ __forceinline__ bool present(const float* p) { return p != nullptr; }
__device__ __forceinline__ bool present(detail::DOut o) { return o.p != nullptr; }

// y and dx of one element, the same expressions on both paths (so the same bits
// for the same statistics): y = x̂·gamma + beta, dx = gamma·invstd/m ·
// (m·dy − Σ dy − x̂·Σ dy·x̂) with k = gamma·invstd/m.
__device__ __forceinline__ float normalised(float x, float mean, float invstd, float g, float b) {
  return (x - mean) * invstd * g + b;
}
__device__ __forceinline__ float input_grad(float x, float dy, float mean, float invstd, float k, int64_t m,
                                            float sum_dy, float sum_dy_xhat) {
  const float xhat = (x - mean) * invstd;
  return k * (static_cast<float>(m) * dy - sum_dy - xhat * sum_dy_xhat);
}

// What both paths write for channel ch from its mean and biased variance: the
// saved mean and inverse std, and PyTorch's running statistics (unbiased variance).
__device__ void store_channel_stats(int64_t ch, float mean_f, float invstd, double var, int64_t m, float momentum,
                                    float* save_mean, float* save_invstd, float* running_mean, float* running_var) {
  save_mean[ch] = mean_f;
  save_invstd[ch] = invstd;
  if (running_mean) running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean_f;
  if (running_var) {
    const double unbiased = m > 1 ? var * static_cast<double>(m) / static_cast<double>(m - 1) : var;
    running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * static_cast<float>(unbiased);
  }
}

template <class X, class Y>
__global__ void batchnorm_fwd_kernel(X x, const float* gamma, const float* beta, Y y,
                                     float* save_mean, float* save_invstd, float* running_mean,
                                     float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                                     float momentum) {
  __shared__ double shared[32];
  const int64_t m = n * hw;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum = 0.0;
    ChannelWalk w(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) sum += ld(x, w.at(c, ch));
    const double mean = detail::block_sum(sum, shared) / static_cast<double>(m);
    double sq = 0.0;
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const double d = ld(x, w.at(c, ch)) - mean;
      sq += d * d;
    }
    const double var = detail::block_sum(sq, shared) / static_cast<double>(m);  // biased
    const float mean_f = static_cast<float>(mean);
    const float invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    const float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const int64_t at = w.at(c, ch);
      st(y, at, normalised(ld(x, at), mean_f, invstd, g, b), false);
    }
    if (threadIdx.x == 0)
      store_channel_stats(ch, mean_f, invstd, var, m, momentum, save_mean, save_invstd, running_mean, running_var);
  }
}

// With x̂ = (x − mean)·invstd: dbeta = Σ dy, dgamma = Σ dy·x̂,
// dx = gamma·invstd/m · (m·dy − Σ dy − x̂·Σ dy·x̂).
template <class X, class D, class DX>
__global__ void batchnorm_bwd_kernel(X x, D dy, const float* gamma,
                                     const float* save_mean, const float* save_invstd, DX dx,
                                     float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw,
                                     bool accumulate) {
  __shared__ double shared[32];
  const int64_t m = n * hw;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    ChannelWalk w(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const int64_t at = w.at(c, ch);
      const float xhat = (ld(x, at) - mean) * invstd;
      sum_dy += ld(dy, at);
      sum_dy_xhat += static_cast<double>(ld(dy, at)) * xhat;
    }
    sum_dy = detail::block_sum(sum_dy, shared);
    sum_dy_xhat = detail::block_sum(sum_dy_xhat, shared);
    if (threadIdx.x == 0) {
      if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
      if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    }
    if (!present(dx)) continue;
    const float g = gamma ? gamma[ch] : 1.0f;
    const float k = g * invstd / static_cast<float>(m);
    const float mean_dy = static_cast<float>(sum_dy), mean_dy_xhat = static_cast<float>(sum_dy_xhat);
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const int64_t at = w.at(c, ch);
      st(dx, at, input_grad(ld(x, at), ld(dy, at), mean, invstd, k, m, mean_dy, mean_dy_xhat), accumulate);
    }
  }
}

// ---- the grid-wide path: each channel split over several blocks ----------------
//
// One block per channel leaves most of a GPU idle where channels are few and
// large (a ResNet's first stage: 64 channels of n·56·56 values). With a buffer
// of doubles (the backend lends its cuBLAS workspace), each channel's values
// are split into `splits` contiguous ranges, one block each (blockIdx.x the
// range, blockIdx.y the channel); a second kernel adds a channel's range sums
// in range order. splits depends on the shape alone, so every sum's order does.

constexpr int64_t kTargetBlocks = 1024;  // blocks a pass aims at, over all channels
constexpr int64_t kMinPerBlock = 4096;   // values a range holds at least (when there are that many)

int64_t bn_splits(int64_t c, int64_t m) {
  const int64_t want = (kTargetBlocks + c - 1) / c, most = (m + kMinPerBlock - 1) / kMinPerBlock;
  const int64_t s = want < most ? want : most;
  return s < 1 ? 1 : s;
}

// A thread's elements of a range go kUnroll at a time, blockDim apart, all
// loaded before any is added: one 2-byte load in flight a thread keeps too
// few bytes in flight to keep the memory busy (the bf16 ResNet-50's batch
// norms took 19 of its 45 ms on an H200). Each of the kUnroll lanes of a
// thread has its own sum, added in lane order at the end: a fixed order, so
// every run gives the same bits.
using detail::kUnroll;

// The walks of a thread's kUnroll lanes over a range's elements first, first
// + step, ...: lane j at first + j·step, each moving kUnroll·step at a time.
struct Lanes {
  ChannelWalk w[kUnroll];
  __device__ Lanes(int64_t first, int64_t step, int64_t hw)
      : w{ChannelWalk(first, kUnroll * step, hw), ChannelWalk(first + step, kUnroll * step, hw),
          ChannelWalk(first + 2 * step, kUnroll * step, hw), ChannelWalk(first + 3 * step, kUnroll * step, hw)} {}
  __device__ void next() {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) w[j].next();
  }
};
static_assert(kUnroll == 4, "Lanes constructs four walks");

// part[ch·splits + s] = Σ over range s of channel ch of x (Centred: of (x − mean[ch])²).
template <bool Centred, class X>
__global__ void bn_range_sums_kernel(X x, const double* mean, double* part, int64_t n, int64_t c,
                                     int64_t hw, int64_t splits) {
  __shared__ double shared[32];
  const int64_t ch = blockIdx.y, s = blockIdx.x, m = n * hw;
  const int64_t chunk = (m + splits - 1) / splits, lo = s * chunk, hi = lo + chunk < m ? lo + chunk : m;
  const double mu = Centred ? mean[ch] : 0.0;
  const int64_t step = blockDim.x;
  double acc[kUnroll] = {};
  if (lo + threadIdx.x < hi) {
    Lanes l(lo + threadIdx.x, step, hw);
    for (int64_t e = lo + threadIdx.x; e < hi; e += kUnroll * step, l.next()) {
      float v[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) v[j] = e + j * step < hi ? ld(x, l.w[j].at(c, ch)) : 0.0f;
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if (e + j * step >= hi) break;
        if constexpr (Centred) {
          const double d = v[j] - mu;
          acc[j] += d * d;
        } else {
          acc[j] += v[j];
        }
      }
    }
  }
  const double sum = detail::block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]), shared);
  if (threadIdx.x == 0) part[ch * splits + s] = sum;
}

// mean[ch] = Σ_s part[ch·splits + s] / m, in range order.
__global__ void bn_mean_kernel(const double* part, double* mean, int64_t c, int64_t splits, int64_t m) {
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < c; ch += int64_t{gridDim.x} * blockDim.x) {
    double sum = 0.0;
    for (int64_t s = 0; s < splits; ++s) sum += part[ch * splits + s];
    mean[ch] = sum / static_cast<double>(m);
  }
}

// The statistics from the mean and the centred squares' range sums, as the
// per-channel kernel writes them.
__global__ void bn_stats_kernel(const double* part, const double* mean, float* save_mean, float* save_invstd,
                                float* running_mean, float* running_var, int64_t c, int64_t splits, int64_t m,
                                float eps, float momentum) {
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < c; ch += int64_t{gridDim.x} * blockDim.x) {
    double sq = 0.0;
    for (int64_t s = 0; s < splits; ++s) sq += part[ch * splits + s];
    const double var = sq / static_cast<double>(m);  // biased
    store_channel_stats(ch, static_cast<float>(mean[ch]), static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps))),
                        var, m, momentum, save_mean, save_invstd, running_mean, running_var);
  }
}

// y = (x − mean)·invstd·gamma + beta over every (image, channel) plane:
// planes along y (grid-stride), a plane's hw values along x.
template <class X, class Y>
__global__ void bn_apply_kernel(X x, const float* gamma, const float* beta, const float* save_mean,
                                const float* save_invstd, Y y, int64_t n, int64_t c, int64_t hw) {
  for (int64_t p = blockIdx.y; p < n * c; p += gridDim.y) {
    const int64_t ch = p % c;
    const float mean_f = save_mean[ch], invstd = save_invstd[ch];
    const float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
    const int64_t step = int64_t{gridDim.x} * blockDim.x;  // kUnroll elements a thread at a time, loaded first
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < hw; i += kUnroll * step) {
      float v[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) v[j] = i + j * step < hw ? ld(x, p * hw + i + j * step) : 0.0f;
#pragma unroll
      for (int j = 0; j < kUnroll; ++j)
        if (i + j * step < hw) st(y, p * hw + i + j * step, normalised(v[j], mean_f, invstd, g, b), false);
    }
  }
}

// part[ch·splits + s] = Σ dy and part[(c + ch)·splits + s] = Σ dy·x̂ over range s of channel ch
// (kUnroll lanes a thread, as bn_range_sums_kernel).
template <class X, class D>
__global__ void bn_bwd_range_sums_kernel(X x, D dy, const float* save_mean,
                                         const float* save_invstd, double* part, int64_t n, int64_t c, int64_t hw,
                                         int64_t splits) {
  __shared__ double shared[32];
  const int64_t ch = blockIdx.y, s = blockIdx.x, m = n * hw;
  const int64_t chunk = (m + splits - 1) / splits, lo = s * chunk, hi = lo + chunk < m ? lo + chunk : m;
  const float mean = save_mean[ch], invstd = save_invstd[ch];
  const int64_t step = blockDim.x;
  double sum_dy[kUnroll] = {}, sum_dy_xhat[kUnroll] = {};
  if (lo + threadIdx.x < hi) {
    Lanes l(lo + threadIdx.x, step, hw);
    for (int64_t e = lo + threadIdx.x; e < hi; e += kUnroll * step, l.next()) {
      float xv[kUnroll], gv[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const bool in = e + j * step < hi;
        const int64_t at = l.w[j].at(c, ch);
        xv[j] = in ? ld(x, at) : 0.0f;
        gv[j] = in ? ld(dy, at) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if (e + j * step >= hi) break;
        const float xhat = (xv[j] - mean) * invstd;
        sum_dy[j] += gv[j];
        sum_dy_xhat[j] += static_cast<double>(gv[j]) * xhat;
      }
    }
  }
  const double a = detail::block_sum((sum_dy[0] + sum_dy[1]) + (sum_dy[2] + sum_dy[3]), shared);
  const double b = detail::block_sum((sum_dy_xhat[0] + sum_dy_xhat[1]) + (sum_dy_xhat[2] + sum_dy_xhat[3]), shared);
  if (threadIdx.x == 0) {
    part[ch * splits + s] = a;
    part[(c + ch) * splits + s] = b;
  }
}

// Per channel: the two sums in range order into sums[ch] and sums[c + ch];
// dbeta += Σ dy, dgamma += Σ dy·x̂.
__global__ void bn_bwd_sums_kernel(const double* part, double* sums, float* dgamma, float* dbeta, int64_t c,
                                   int64_t splits) {
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < c; ch += int64_t{gridDim.x} * blockDim.x) {
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t s = 0; s < splits; ++s) {
      sum_dy += part[ch * splits + s];
      sum_dy_xhat += part[(c + ch) * splits + s];
    }
    sums[ch] = sum_dy;
    sums[c + ch] = sum_dy_xhat;
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
  }
}

// dx = or += gamma·invstd/m · (m·dy − Σ dy − x̂·Σ dy·x̂), planes as bn_apply_kernel.
template <class X, class D, class DX>
__global__ void bn_bwd_apply_kernel(X x, D dy, const float* gamma, const float* save_mean,
                                    const float* save_invstd, const double* sums, DX dx, int64_t n, int64_t c,
                                    int64_t hw, bool accumulate) {
  const int64_t m = n * hw;
  for (int64_t p = blockIdx.y; p < n * c; p += gridDim.y) {
    const int64_t ch = p % c;
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    const float g = gamma ? gamma[ch] : 1.0f;
    const float k = g * invstd / static_cast<float>(m);
    const float mean_dy = static_cast<float>(sums[ch]), mean_dy_xhat = static_cast<float>(sums[c + ch]);
    const int64_t step = int64_t{gridDim.x} * blockDim.x;  // kUnroll elements a thread at a time, loaded first
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < hw; i += kUnroll * step) {
      float xv[kUnroll], gv[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const bool in = i + j * step < hw;
        xv[j] = in ? ld(x, p * hw + i + j * step) : 0.0f;
        gv[j] = in ? ld(dy, p * hw + i + j * step) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j)
        if (i + j * step < hw)
          st(dx, p * hw + i + j * step, input_grad(xv[j], gv[j], mean, invstd, k, m, mean_dy, mean_dy_xhat),
             accumulate);
    }
  }
}

// Planes of at most kPackSpan / 2 values (a ResNet's last two stages: 14·14
// and 7·7 a plane) leave most of the kernels above idle, a block to a plane
// and most of its threads without an element: here a block takes `per`
// whole consecutive planes, kPackSpan values at most, each thread kUnroll of
// them kChannelBlock apart (loaded first), its plane and channel from 32-bit
// divisions of offsets within the block's planes. Each element's value is
// the same expression of the same inputs as above: the same bits.
constexpr int kPackSpan = kChannelBlock * kUnroll;

bool packed(int64_t hw) { return hw <= kPackSpan / 2; }
int pack_per(int64_t hw) { return static_cast<int>(kPackSpan / hw); }
unsigned pack_grid(int64_t planes, int per) {
  const int64_t blocks = (planes + per - 1) / per;
  return static_cast<unsigned>(blocks < detail::kMaxBlocks ? blocks : detail::kMaxBlocks);
}

template <class X, class Y>
__global__ void bn_apply_packed_kernel(X x, const float* gamma, const float* beta, const float* save_mean,
                                       const float* save_invstd, Y y, int64_t planes, int c, int hw, int per) {
  for (int64_t first = int64_t{blockIdx.x} * per; first < planes; first += int64_t{gridDim.x} * per) {
    const int count = static_cast<int>(planes - first < per ? planes - first : per) * hw;
    const int64_t base = first * hw;
    const int ch0 = static_cast<int>(first % c);
    float v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int e = threadIdx.x + j * kChannelBlock;
      v[j] = e < count ? ld(x, base + e) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int e = threadIdx.x + j * kChannelBlock;
      if (e >= count) break;
      const int ch = (ch0 + e / hw) % c;
      st(y, base + e,
         normalised(v[j], save_mean[ch], save_invstd[ch], gamma ? gamma[ch] : 1.0f, beta ? beta[ch] : 0.0f), false);
    }
  }
}

template <class X, class D, class DX>
__global__ void bn_bwd_apply_packed_kernel(X x, D dy, const float* gamma, const float* save_mean,
                                           const float* save_invstd, const double* sums, DX dx, int64_t planes,
                                           int c, int hw, int64_t m, int per, bool accumulate) {
  for (int64_t first = int64_t{blockIdx.x} * per; first < planes; first += int64_t{gridDim.x} * per) {
    const int count = static_cast<int>(planes - first < per ? planes - first : per) * hw;
    const int64_t base = first * hw;
    const int ch0 = static_cast<int>(first % c);
    float xv[kUnroll], gv[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int e = threadIdx.x + j * kChannelBlock;
      xv[j] = e < count ? ld(x, base + e) : 0.0f;
      gv[j] = e < count ? ld(dy, base + e) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int e = threadIdx.x + j * kChannelBlock;
      if (e >= count) break;
      const int ch = (ch0 + e / hw) % c;
      const float mean = save_mean[ch], invstd = save_invstd[ch];
      const float g = gamma ? gamma[ch] : 1.0f;
      const float k = g * invstd / static_cast<float>(m);
      const float mean_dy = static_cast<float>(sums[ch]), mean_dy_xhat = static_cast<float>(sums[c + ch]);
      st(dx, base + e, input_grad(xv[j], gv[j], mean, invstd, k, m, mean_dy, mean_dy_xhat), accumulate);
    }
  }
}

// Planes along y (at most 65535 at once), a plane's values along x, kUnroll a thread.
dim3 plane_grid(int64_t n, int64_t c, int64_t hw) {
  const int64_t planes = n * c, across = (hw + kChannelBlock * kUnroll - 1) / (kChannelBlock * kUnroll);
  return dim3(static_cast<unsigned>(across < 64 ? across : 64), static_cast<unsigned>(planes < 65535 ? planes : 65535));
}

unsigned channel_threads_grid(int64_t c) { return static_cast<unsigned>((c + kChannelBlock - 1) / kChannelBlock); }

// Whether the grid-wide path can run: a buffer large enough, channels that fit gridDim.y.
bool grid_path(int64_t n, int64_t c, int64_t hw, const double* partials, int64_t capacity) {
  const int64_t need = batchnorm_partial_count(n, c, hw);
  return partials != nullptr && need > 0 && capacity >= need;
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

int64_t batchnorm_partial_count(int64_t n, int64_t c, int64_t hw) {
  detail::check_sizes("batchnorm_partial_count", {n, c, hw});
  if (c < 1 || c > 65535 || n * hw == 0) return 0;  // channels along gridDim.y; nothing to split
  return 2 * c * (bn_splits(c, n * hw) + 1);        // the backward's: 2·c·splits ranges, 2·c sums
}

namespace {

// The launchers' bodies, for f32 pointers and for tensors as stored alike.
template <class X, class Y>
void bn_fwd(X x, const float* gamma, const float* beta, Y y, float* save_mean, float* save_invstd,
            float* running_mean, float* running_var, int64_t n, int64_t c, int64_t hw, float eps, float momentum,
            cudaStream_t stream, double* partials, int64_t capacity) {
  detail::check_sizes("batchnorm_fwd", {n, c, hw});
  if (c == 0) return;
  if (n * hw == 0) throw std::invalid_argument("batchnorm_fwd: a channel has no values (n·hw = 0)");
  if (!grid_path(n, c, hw, partials, capacity)) {
    batchnorm_fwd_kernel<<<channel_grid(c), kChannelBlock, 0, stream>>>(
        x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps, momentum);
    CUDA_CHECK_THROW(cudaGetLastError());
    return;
  }
  const int64_t m = n * hw, splits = bn_splits(c, m);
  double* part = partials;          // c·splits range sums
  double* mean = partials + c * splits;  // c means
  const dim3 ranges(static_cast<unsigned>(splits), static_cast<unsigned>(c));
  bn_range_sums_kernel<false><<<ranges, kChannelBlock, 0, stream>>>(x, nullptr, part, n, c, hw, splits);
  CUDA_CHECK_THROW(cudaGetLastError());
  bn_mean_kernel<<<channel_threads_grid(c), kChannelBlock, 0, stream>>>(part, mean, c, splits, m);
  CUDA_CHECK_THROW(cudaGetLastError());
  bn_range_sums_kernel<true><<<ranges, kChannelBlock, 0, stream>>>(x, mean, part, n, c, hw, splits);
  CUDA_CHECK_THROW(cudaGetLastError());
  bn_stats_kernel<<<channel_threads_grid(c), kChannelBlock, 0, stream>>>(part, mean, save_mean, save_invstd,
                                                                         running_mean, running_var, c, splits, m,
                                                                         eps, momentum);
  CUDA_CHECK_THROW(cudaGetLastError());
  if (packed(hw)) {
    const int per = pack_per(hw);
    bn_apply_packed_kernel<<<pack_grid(n * c, per), kChannelBlock, 0, stream>>>(
        x, gamma, beta, save_mean, save_invstd, y, n * c, static_cast<int>(c), static_cast<int>(hw), per);
  } else {
    bn_apply_kernel<<<plane_grid(n, c, hw), kChannelBlock, 0, stream>>>(x, gamma, beta, save_mean, save_invstd, y,
                                                                        n, c, hw);
  }
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <class X, class D, class DX>
void bn_bwd(X x, D dy, const float* gamma, const float* save_mean, const float* save_invstd, DX dx, float* dgamma,
            float* dbeta, int64_t n, int64_t c, int64_t hw, bool accumulate, cudaStream_t stream, double* partials,
            int64_t capacity, bool dx_wanted) {
  detail::check_sizes("batchnorm_bwd", {n, c, hw});
  if (c == 0 || n * hw == 0) return;
  if (!grid_path(n, c, hw, partials, capacity)) {
    batchnorm_bwd_kernel<<<channel_grid(c), kChannelBlock, 0, stream>>>(
        x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, n, c, hw, accumulate);
    CUDA_CHECK_THROW(cudaGetLastError());
    return;
  }
  const int64_t splits = bn_splits(c, n * hw);
  double* part = partials;                  // 2·c·splits range sums
  double* sums = partials + 2 * c * splits;  // 2·c channel sums
  const dim3 ranges(static_cast<unsigned>(splits), static_cast<unsigned>(c));
  bn_bwd_range_sums_kernel<<<ranges, kChannelBlock, 0, stream>>>(x, dy, save_mean, save_invstd, part, n, c, hw,
                                                                  splits);
  CUDA_CHECK_THROW(cudaGetLastError());
  bn_bwd_sums_kernel<<<channel_threads_grid(c), kChannelBlock, 0, stream>>>(part, sums, dgamma, dbeta, c, splits);
  CUDA_CHECK_THROW(cudaGetLastError());
  if (!dx_wanted) return;
  if (packed(hw)) {
    const int per = pack_per(hw);
    bn_bwd_apply_packed_kernel<<<pack_grid(n * c, per), kChannelBlock, 0, stream>>>(
        x, dy, gamma, save_mean, save_invstd, sums, dx, n * c, static_cast<int>(c), static_cast<int>(hw), n * hw, per,
        accumulate);
  } else {
    bn_bwd_apply_kernel<<<plane_grid(n, c, hw), kChannelBlock, 0, stream>>>(x, dy, gamma, save_mean, save_invstd,
                                                                            sums, dx, n, c, hw, accumulate);
  }
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace

void batchnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                   float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c,
                   int64_t hw, float eps, float momentum, cudaStream_t stream, double* partials,
                   int64_t capacity) {
  bn_fwd(x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps, momentum, stream,
         partials, capacity);
}

void batchnorm_bwd(const float* x, const float* dy, const float* gamma, const float* save_mean,
                   const float* save_invstd, float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c,
                   int64_t hw, bool accumulate, cudaStream_t stream, double* partials, int64_t capacity) {
  bn_bwd(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, n, c, hw, accumulate, stream, partials, capacity,
         dx != nullptr);
}

void batchnorm_fwd_io(IoIn x, const float* gamma, const float* beta, IoOut y, float* save_mean, float* save_invstd,
                      int64_t n, int64_t c, int64_t hw, float eps, cudaStream_t stream, double* partials,
                      int64_t capacity) {
  bn_fwd(detail::din(x), gamma, beta, detail::dout(y), save_mean, save_invstd, nullptr, nullptr, n, c, hw, eps, 0.1f,
         stream, partials, capacity);
}

void batchnorm_bwd_io(IoIn x, IoIn dy, const float* gamma, const float* save_mean, const float* save_invstd, IoOut dx,
                      float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, cudaStream_t stream,
                      double* partials, int64_t capacity) {
  bn_bwd(detail::din(x), detail::din(dy), gamma, save_mean, save_invstd, detail::dout(dx), dgamma, dbeta, n, c, hw,
         false, stream, partials, capacity, dx.p != nullptr);
}

}  // namespace remat::cuda
