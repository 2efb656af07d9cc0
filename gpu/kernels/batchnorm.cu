// Batch normalisation in training mode over x (n, c, hw): one block per channel
// reduces its n·hw values with a fixed tree in double (two passes: the mean,
// then the centred squares), so results are bit-identical from run to run and
// recomputation changes nothing. gamma/beta may be null (affine=False). Each
// thread walks its elements with a ChannelWalk (channel_walk.h): no 64-bit
// division per element.
#include <cmath>

#include "gpu/kernels/channel_walk.h"
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::ChannelWalk;

constexpr int kChannelBlock = 256;

unsigned channel_grid(int64_t c) {
  return static_cast<unsigned>(c < detail::kMaxBlocks ? c : detail::kMaxBlocks);
}

// ---- kernels ------------------------------------------------------------------

__global__ void batchnorm_fwd_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                     float* save_mean, float* save_invstd, float* running_mean,
                                     float* running_var, int64_t n, int64_t c, int64_t hw, float eps,
                                     float momentum) {
  __shared__ double shared[32];
  const int64_t m = n * hw;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum = 0.0;
    ChannelWalk w(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) sum += x[w.at(c, ch)];
    const double mean = detail::block_sum(sum, shared) / static_cast<double>(m);
    double sq = 0.0;
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const double d = x[w.at(c, ch)] - mean;
      sq += d * d;
    }
    const double var = detail::block_sum(sq, shared) / static_cast<double>(m);  // biased
    const float mean_f = static_cast<float>(mean);
    const float invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    const float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const int64_t at = w.at(c, ch);
      y[at] = (x[at] - mean_f) * invstd * g + b;
    }
    if (threadIdx.x == 0) {
      save_mean[ch] = mean_f;
      save_invstd[ch] = invstd;
      if (running_mean) running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean_f;
      if (running_var) {
        const double unbiased = m > 1 ? var * static_cast<double>(m) / static_cast<double>(m - 1) : var;
        running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * static_cast<float>(unbiased);
      }
    }
  }
}

// With x̂ = (x − mean)·invstd: dbeta = Σ dy, dgamma = Σ dy·x̂,
// dx = gamma·invstd/m · (m·dy − Σ dy − x̂·Σ dy·x̂).
__global__ void batchnorm_bwd_kernel(const float* x, const float* dy, const float* gamma,
                                     const float* save_mean, const float* save_invstd, float* dx,
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
      const float xhat = (x[at] - mean) * invstd;
      sum_dy += dy[at];
      sum_dy_xhat += static_cast<double>(dy[at]) * xhat;
    }
    sum_dy = detail::block_sum(sum_dy, shared);
    sum_dy_xhat = detail::block_sum(sum_dy_xhat, shared);
    if (threadIdx.x == 0) {
      if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
      if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    }
    if (!dx) continue;
    const float g = gamma ? gamma[ch] : 1.0f;
    const float k = g * invstd / static_cast<float>(m);
    const float mean_dy = static_cast<float>(sum_dy), mean_dy_xhat = static_cast<float>(sum_dy_xhat);
    w = ChannelWalk(threadIdx.x, blockDim.x, hw);
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x, w.next()) {
      const int64_t at = w.at(c, ch);
      const float xhat = (x[at] - mean) * invstd;
      detail::store_grad(&dx[at], k * (static_cast<float>(m) * dy[at] - mean_dy - xhat * mean_dy_xhat),
                         accumulate);
    }
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void batchnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                   float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c,
                   int64_t hw, float eps, float momentum, cudaStream_t stream) {
  detail::check_sizes("batchnorm_fwd", {n, c, hw});
  if (c == 0) return;
  if (n * hw == 0) throw std::invalid_argument("batchnorm_fwd: a channel has no values (n·hw = 0)");
  batchnorm_fwd_kernel<<<channel_grid(c), kChannelBlock, 0, stream>>>(
      x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var, n, c, hw, eps, momentum);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void batchnorm_bwd(const float* x, const float* dy, const float* gamma, const float* save_mean,
                   const float* save_invstd, float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c,
                   int64_t hw, bool accumulate, cudaStream_t stream) {
  detail::check_sizes("batchnorm_bwd", {n, c, hw});
  if (c == 0 || n * hw == 0) return;
  batchnorm_bwd_kernel<<<channel_grid(c), kChannelBlock, 0, stream>>>(
      x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, n, c, hw, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
