// The pieces of attention: batched matrix products of two activations (cuBLAS
// strided-batched SGEMM), softmax over the last axis, scaling by a constant and
// a repeated (causal) mask. Layouts as the CPU kernels (cpu_kernels.h).

#include <cmath>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

constexpr int kSoftmaxBlock = 256;  // threads per row

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < detail::kMaxBlocks ? rows : detail::kMaxBlocks);
}

void gemm_batched(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool trans_a, bool trans_b, bool accumulate, cublasHandle_t cublas, cudaStream_t stream) {
  detail::gemm_rm(a, b, c, batch, m, n, k, trans_a, trans_b, accumulate ? 1.0f : 0.0f, cublas, stream);
}

// ---- kernels ------------------------------------------------------------------

// y (rows, cols) = softmax over each row: exp(x − max) / Σ exp(x − max).
__global__ void softmax_fwd_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    // A block-wide max through the same shared buffer: warp maxima, then theirs.
    m = detail::warp_max(m);
    __syncthreads();
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = m;
    __syncthreads();
    m = detail::warp_max(threadIdx.x % 32 < blockDim.x / 32 ? shared[threadIdx.x % 32] : -INFINITY);
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    sum = detail::block_sum(sum, shared);
    const float inv = 1.0f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
  }
}

// dx = or += y · (dy − Σ dy·y), per row.
__global__ void softmax_bwd_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                   int64_t cols, bool accumulate) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += dyr[c] * yr[c];
    dot = detail::block_sum(dot, shared);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      detail::store_grad(&dxr[c], yr[c] * (dyr[c] - dot), accumulate);
  }
}

__global__ void scale_kernel(const float* x, float* y, int64_t n, float alpha, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&y[i], alpha * x[i], accumulate);
}

// y = mask ? value : x, the mask repeating every mask_n elements.
__global__ void masked_fill_fwd_kernel(const float* x, const uint8_t* mask, float* y, int64_t n,
                                       int64_t mask_n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = mask[i % mask_n] ? value : x[i];
}

__global__ void masked_fill_bwd_kernel(const float* dy, const uint8_t* mask, float* dx, int64_t n,
                                       int64_t mask_n, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&dx[i], mask[i % mask_n] ? 0.0f : dy[i], accumulate);
}

// ---- launchers ----------------------------------------------------------------

}  // namespace

void bmm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
         bool trans_a, bool trans_b, bool accumulate, cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("bmm", {batch, m, n, k});
  gemm_batched(a, b, c, batch, m, n, k, trans_a, trans_b, accumulate, cublas, stream);
}

void gemm_strided(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool trans_a, bool trans_b, bool accumulate, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("gemm_strided", {batch, m, n, k, stride_a, stride_b, stride_c});
  if (batch > 1 && stride_c == 0)
    throw std::invalid_argument("gemm_strided: several products into one matrix (stride_c 0) would race");
  detail::gemm_rm(a, b, c, batch, m, n, k, trans_a, trans_b, accumulate ? 1.0f : 0.0f, cublas, stream, stride_a,
                  stride_b, stride_c);
}

// c = op(a)·op(b), dc (m, n):
//   d op(a) = dc·op(b)ᵀ (m, k): a stored (m, k): da = dc·op(b)ᵀ; stored (k, m): da = op(b)·dcᵀ.
//   d op(b) = op(a)ᵀ·dc (k, n): b stored (k, n): db = op(a)ᵀ·dc; stored (n, k): db = dcᵀ·op(a).
// op(b)ᵀ as a stored operand is b with the transpose flag flipped, likewise op(a)ᵀ.
void bmm_bwd(const float* a, const float* b, const float* dc, float* da, float* db, int64_t batch,
             int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate_a,
             bool accumulate_b, cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("bmm_bwd", {batch, m, n, k});
  if (da) {
    if (!trans_a)  // da (m, k) = dc (m, n) · op(b)ᵀ (n, k)
      gemm_batched(dc, b, da, batch, m, k, n, false, !trans_b, accumulate_a, cublas, stream);
    else  // da (k, m) = op(b) (k, n) · dcᵀ (n, m)
      gemm_batched(b, dc, da, batch, k, m, n, trans_b, true, accumulate_a, cublas, stream);
  }
  if (db) {
    if (!trans_b)  // db (k, n) = op(a)ᵀ (k, m) · dc (m, n)
      gemm_batched(a, dc, db, batch, k, n, m, !trans_a, false, accumulate_b, cublas, stream);
    else  // db (n, k) = dcᵀ (n, m) · op(a) (m, k)
      gemm_batched(dc, a, db, batch, n, k, m, true, trans_a, accumulate_b, cublas, stream);
  }
}

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  detail::check_sizes("softmax_fwd", {rows, cols});
  if (rows == 0 || cols == 0) return;
  softmax_fwd_kernel<<<row_grid(rows), kSoftmaxBlock, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void softmax_bwd(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                 bool accumulate, cudaStream_t stream) {
  detail::check_sizes("softmax_bwd", {rows, cols});
  if (rows == 0 || cols == 0) return;
  softmax_bwd_kernel<<<row_grid(rows), kSoftmaxBlock, 0, stream>>>(y, dy, dx, rows, cols, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void scale_fwd(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  detail::check_sizes("scale_fwd", {n});
  if (n == 0) return;
  scale_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, y, n, alpha, false);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void scale_bwd(const float* dy, float* dx, int64_t n, float alpha, bool accumulate, cudaStream_t stream) {
  detail::check_sizes("scale_bwd", {n});
  if (n == 0) return;
  scale_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(dy, dx, n, alpha, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void masked_fill_fwd(const float* x, const uint8_t* mask, float* y, int64_t n, int64_t mask_n,
                     float value, cudaStream_t stream) {
  detail::check_sizes("masked_fill_fwd", {n, mask_n});
  if (n == 0) return;
  if (mask_n == 0 || n % mask_n != 0)
    throw std::invalid_argument("masked_fill_fwd: the mask (" + std::to_string(mask_n) +
                                " elements) does not repeat over " + std::to_string(n));
  masked_fill_fwd_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, mask, y, n, mask_n, value);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void masked_fill_bwd(const float* dy, const uint8_t* mask, float* dx, int64_t n, int64_t mask_n,
                     bool accumulate, cudaStream_t stream) {
  detail::check_sizes("masked_fill_bwd", {n, mask_n});
  if (n == 0) return;
  if (mask_n == 0 || n % mask_n != 0)
    throw std::invalid_argument("masked_fill_bwd: the mask (" + std::to_string(mask_n) +
                                " elements) does not repeat over " + std::to_string(n));
  masked_fill_bwd_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(dy, mask, dx, n, mask_n, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
