// Row-major batched GEMMs on cuBLAS for the kernels that need them (attention,
// the convolution without cuDNN). cuBLAS is column-major: a row-major (r, c)
// matrix is the column-major (c, r) one, so the row-major c = op(a)·op(b) is
// computed as cᵀ = op(b)ᵀ·op(a)ᵀ: the same call with a and b swapped and the
// transposes kept.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda::detail {
void bind_cublas(cublasHandle_t cublas, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  CUBLAS_CHECK_THROW(cublasGetStream(cublas, &current));
  if (current != stream) CUBLAS_CHECK_THROW(cublasSetStream(cublas, stream));
  CUBLAS_CHECK_THROW(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST));
  CUBLAS_CHECK_THROW(cublasSetAtomicsMode(cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
  CUBLAS_CHECK_THROW(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
}

bool empty_product(float* c, int64_t batch, int64_t m, int64_t n, int64_t k, float beta, cudaStream_t stream,
                   int64_t stride_c) {
  if (batch == 0 || m == 0 || n == 0) return true;
  if (k != 0) return false;
  // An empty product is zero (and cuBLAS rejects a leading dimension of 0).
  if (beta == 0.0f) {
    if (stride_c < 0 || stride_c == m * n)
      CUDA_CHECK_THROW(cudaMemsetAsync(c, 0, sizeof(float) * batch * m * n, stream));
    else
      for (int64_t i = 0; i < batch; ++i)
        CUDA_CHECK_THROW(cudaMemsetAsync(c + i * stride_c, 0, sizeof(float) * m * n, stream));
  }
  return true;
}

void gemm_rm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
             bool trans_a, bool trans_b, float beta, cublasHandle_t cublas, cudaStream_t stream,
             int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  if (empty_product(c, batch, m, n, k, beta, stream, stride_c)) return;
  bind_cublas(cublas, stream);
  const float one = 1.0f;
  const int64_t ldb = trans_b ? k : n;  // b's row length
  const int64_t lda = trans_a ? m : k;  // a's row length
  CUBLAS_CHECK_THROW(cublasSgemmStridedBatched_64(
      cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, ldb,
      stride_b < 0 ? k * n : stride_b, a, lda, stride_a < 0 ? m * k : stride_a, &beta, c, n,
      stride_c < 0 ? m * n : stride_c, batch));
}

}  // namespace remat::cuda::detail
