// Tensor-core GEMMs of mixed precision (docs/gpu.md#mixed-precision-on-tensor-cores):
// bf16 or f16 operands, f32 accumulation, f32 output, through
// cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F. Row-major as gemm_rm
// (gemm.cu): c = op(a)·op(b) is computed as cᵀ = op(b)ᵀ·op(a)ᵀ, a and b
// swapped, the transposes kept.
//
// The operands' values are what autocast's rounding made them, so handing
// them over in 16 bits loses nothing; the products are exact in f32 and only
// the sums differ from the f32 path: the tensor cores add blocks of products
// in their own order, aligning and truncating inside each block, so a result
// is within the bound tests/gpu/test_gpu_gemm_lowp.cpp derives, not bitwise
// the CPU's.
//
// Determinism: bind_cublas pins host pointers and CUBLAS_ATOMICS_NOT_ALLOWED
// on the caller's handle (one handle, one stream, a fixed workspace, as
// cuBLAS's "Results reproducibility" asks), and the math mode forbids
// reduced-precision reductions. cuBLAS picks its kernel from the shapes, the
// types and the operands' alignment; the backend's operands lie at offsets
// the model fixes from the start of pool blocks (aligned alike, whatever the
// strategy), so the same op gets the same alignment, hence the same kernel
// and the same bits, under every strategy.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {

void gemm_lowp(HalfType t, const uint16_t* a, const uint16_t* b, float* c, int64_t batch, int64_t m, int64_t n,
               int64_t k, bool trans_a, bool trans_b, float beta, cublasHandle_t cublas, cudaStream_t stream,
               int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  detail::check_sizes("gemm_lowp", {batch, m, n, k});
  if (detail::empty_product(c, batch, m, n, k, beta, stream, stride_c)) return;
  detail::bind_cublas(cublas, stream);
  CUBLAS_CHECK_THROW(
      cublasSetMathMode(cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  const cudaDataType type = t == HalfType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f;
  const int64_t ldb = trans_b ? k : n;  // b's row length
  const int64_t lda = trans_a ? m : k;  // a's row length
  CUBLAS_CHECK_THROW(cublasGemmStridedBatchedEx_64(
      cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, type, ldb,
      stride_b < 0 ? k * n : stride_b, a, type, lda, stride_a < 0 ? m * k : stride_a, &beta, c, CUDA_R_32F, n,
      stride_c < 0 ? m * n : stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace remat::cuda
