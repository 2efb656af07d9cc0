// Group normalisation (cpu_kernels.h: groupnorm_fwd/bwd): one block per
// (sample, group) for the statistics and dx, one block per channel for dgamma
// and dbeta. Sums in double with a block tree fixed by the launch shape: the
// same bits on every run (no atomics), close to the CPU's sequential order.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(n < detail::kMaxBlocks ? n : detail::kMaxBlocks); }

__global__ void groupnorm_fwd_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean_out,
                                     float* rstd_out, int64_t n, int64_t c, int64_t hw, int64_t groups, double eps) {
  __shared__ double shared[32];
  const int64_t cg = c / groups, m = cg * hw;
  for (int64_t b = blockIdx.x; b < n * groups; b += gridDim.x) {
    const float* xg = x + b * m;  // (img, g) is contiguous: img·c·hw + g·cg·hw = b·m
    float* yg = y + b * m;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += xg[i];
    const double mean = detail::block_sum(s, shared) / static_cast<double>(m);
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const double d = xg[i] - mean;
      sq += d * d;
    }
    const double var = detail::block_sum(sq, shared) / static_cast<double>(m);
    const float mean_f = static_cast<float>(mean);
    const float rstd = static_cast<float>(1.0 / sqrt(var + eps));
    if (threadIdx.x == 0) {
      mean_out[b] = mean_f;
      rstd_out[b] = rstd;
    }
    const int64_t g = b % groups;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const int64_t ch = g * cg + i / hw;
      yg[i] = __fadd_rn(__fmul_rn(__fsub_rn(xg[i], mean_f), __fmul_rn(rstd, gamma ? gamma[ch] : 1.0f)), beta ? beta[ch] : 0.0f);
    }
  }
}

__global__ void groupnorm_dx_kernel(const float* x, const float* dy, const float* gamma, const float* mean_in,
                                    const float* rstd_in, float* dx, int64_t n, int64_t c, int64_t hw, int64_t groups,
                                    bool accumulate) {
  __shared__ double shared[32];
  const int64_t cg = c / groups, m = cg * hw;
  for (int64_t b = blockIdx.x; b < n * groups; b += gridDim.x) {
    const float* xg = x + b * m;
    const float* dyg = dy + b * m;
    float* dxg = dx + b * m;
    const int64_t g = b % groups;
    const float mean = mean_in[b], rstd = rstd_in[b];
    double sg = 0.0, dg = 0.0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const double gd = static_cast<double>(dyg[i]) * (gamma ? gamma[g * cg + i / hw] : 1.0f);
      sg += gd;
      dg += static_cast<double>(xg[i] - mean) * gd;
    }
    sg = detail::block_sum(sg, shared);
    dg = detail::block_sum(dg, shared);
    const float mean_g = static_cast<float>(sg / static_cast<double>(m));
    const float k2 = static_cast<float>(dg * rstd * rstd / static_cast<double>(m));
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const float gm = gamma ? gamma[g * cg + i / hw] : 1.0f;
      const float v = __fmul_rn(__fsub_rn(__fsub_rn(__fmul_rn(dyg[i], gm), mean_g), __fmul_rn(__fsub_rn(xg[i], mean), k2)), rstd);
      detail::store_grad(&dxg[i], v, accumulate);
    }
  }
}

// dbeta[ch] += Σ dy over the channel's n·hw values; dgamma[ch] += Σ_img
// rstd(img, group)·Σ_hw dy·(x − mean(img, group)), images in order.
__global__ void groupnorm_dparams_kernel(const float* x, const float* dy, const float* mean_in, const float* rstd_in,
                                         float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw,
                                         int64_t groups) {
  __shared__ double shared[32];
  const int64_t cg = c / groups;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum_dy = 0.0, sum_dyx = 0.0;
    for (int64_t img = 0; img < n; ++img) {
      const int64_t b = img * groups + ch / cg;
      const float mean = mean_in[b];
      double part_dy = 0.0, part_dyx = 0.0;
      for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
        const int64_t at = (img * c + ch) * hw + i;
        part_dy += dy[at];
        part_dyx += static_cast<double>(dy[at]) * static_cast<double>(x[at] - mean);
      }
      sum_dy += detail::block_sum(part_dy, shared);
      sum_dyx += detail::block_sum(part_dyx, shared) * rstd_in[b];
    }
    if (threadIdx.x == 0) {
      dgamma[ch] += static_cast<float>(sum_dyx);
      dbeta[ch] += static_cast<float>(sum_dy);
    }
  }
}

}  // namespace

void groupnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                   int64_t n, int64_t c, int64_t hw, int64_t groups, double eps, cudaStream_t stream) {
  detail::check_sizes("groupnorm_fwd", {n, c, hw, groups});
  if (n * c * hw == 0) return;
  groupnorm_fwd_kernel<<<blocks_for(n * groups), detail::kBlock, 0, stream>>>(x, gamma, beta, y, mean, rstd, n, c, hw,
                                                                              groups, eps);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void groupnorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                   float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, int64_t groups,
                   bool accumulate, cudaStream_t stream) {
  detail::check_sizes("groupnorm_bwd", {n, c, hw, groups});
  if (n * c * hw == 0) return;
  groupnorm_dx_kernel<<<blocks_for(n * groups), detail::kBlock, 0, stream>>>(x, dy, gamma, mean, rstd, dx, n, c, hw,
                                                                             groups, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
  if (!dgamma || !dbeta) return;  // no affine parameters: no parameter gradient
  groupnorm_dparams_kernel<<<blocks_for(c), detail::kBlock, 0, stream>>>(x, dy, mean, rstd, dgamma, dbeta, n, c, hw,
                                                                         groups);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
