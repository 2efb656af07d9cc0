// LayerNorm over the last dimension (eps the model's, 1e-5 by default; affine gamma/beta), one block per
// row for the statistics and dx, and a column-strip kernel for dgamma/dbeta so that
// those sums over rows have a fixed order instead of atomics.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

constexpr int kRowBlock = 256;  // threads per row; a multiple of 32 for block_sum
constexpr int kRowLanes = 8;    // row strides per column strip in the parameter kernel

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < detail::kMaxBlocks ? rows : detail::kMaxBlocks);
}

// ---- kernels ------------------------------------------------------------------

// y (rows, cols); stats (2, rows) = means then rstds. Two passes (mean, then the
// centred squares) rather than E[x²] - E[x]², which cancels for rows with a big mean.
__global__ void layernorm_fwd_kernel(const float* x, const float* gamma, const float* beta,
                                     float* y, float* stats, int64_t rows, int64_t cols, float eps) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
    const float mean = detail::block_sum(sum, shared) / static_cast<float>(cols);
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = xr[c] - mean;
      sq += d * d;
    }
    const float var = detail::block_sum(sq, shared) / static_cast<float>(cols);  // biased
    const float rstd = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
      stats[r] = mean;
      stats[rows + r] = rstd;
    }
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      yr[c] = (xr[c] - mean) * rstd * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
  }
}

// dx (rows, cols): with x̂ = (x - mean)·rstd and g = dy·gamma,
// dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)).
__global__ void layernorm_dx_kernel(const float* x, const float* stats, const float* gamma,
                                    const float* dy, float* dx, int64_t rows, int64_t cols,
                                    bool accumulate) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float mean = stats[r];
    const float rstd = stats[rows + r];
    float sum_g = 0.0f;
    float sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      const float g = dyr[c] * (gamma ? gamma[c] : 1.0f);
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mean_g = detail::block_sum(sum_g, shared) / static_cast<float>(cols);
    const float mean_gx = detail::block_sum(sum_gx, shared) / static_cast<float>(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      detail::store_grad(&dxr[c], rstd * (dyr[c] * (gamma ? gamma[c] : 1.0f) - mean_g - xhat * mean_gx),
                         accumulate);
    }
  }
}

// dgamma (cols) += Σ_rows dy·x̂;  dbeta (cols) += Σ_rows dy. Block (32, kRowLanes):
// threadIdx.x picks a column, threadIdx.y a fixed stride of rows, and the partial
// sums are added in index order.
__global__ void layernorm_dparams_kernel(const float* x, const float* stats, const float* dy,
                                         float* dgamma, float* dbeta, int64_t rows,
                                         int64_t cols) {
  __shared__ float part_g[kRowLanes][33];
  __shared__ float part_b[kRowLanes][33];
  const int64_t col = blockIdx.x * int64_t{32} + threadIdx.x;
  float sum_g = 0.0f;
  float sum_b = 0.0f;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      const float d = dy[r * cols + col];
      const float xhat = (x[r * cols + col] - stats[r]) * stats[rows + r];
      sum_g += d * xhat;
      sum_b += d;
    }
  }
  part_g[threadIdx.y][threadIdx.x] = sum_g;
  part_b[threadIdx.y][threadIdx.x] = sum_b;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total_g = 0.0f;
    float total_b = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) {
      total_g += part_g[k][threadIdx.x];
      total_b += part_b[k][threadIdx.x];
    }
    dgamma[col] += total_g;
    dbeta[col] += total_b;
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y,
                   float* stats, int64_t rows, int64_t cols, cudaStream_t stream, float eps) {
  detail::check_sizes("layernorm_fwd", {rows, cols});
  if (rows == 0) return;
  // cols == 0 still runs: the stats become 0/0 = NaN, as on the CPU.
  layernorm_fwd_kernel<<<row_grid(rows), kRowBlock, 0, stream>>>(x, gamma, beta, y, stats,
                                                                  rows, cols, eps);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void layernorm_bwd(const float* x, const float* stats, const float* gamma, const float* dy,
                   float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                   bool accumulate, cudaStream_t stream) {
  detail::check_sizes("layernorm_bwd", {rows, cols});
  if (rows == 0 || cols == 0) return;
  layernorm_dx_kernel<<<row_grid(rows), kRowBlock, 0, stream>>>(x, stats, gamma, dy, dx, rows,
                                                                 cols, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
  if (!dgamma || !dbeta) return;  // no affine parameters: no parameter gradient
  const dim3 block(32, kRowLanes);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32));
  layernorm_dparams_kernel<<<grid, block, 0, stream>>>(x, stats, dy, dgamma, dbeta, rows, cols);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
