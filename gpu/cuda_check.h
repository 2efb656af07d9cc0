// Error checks for CUDA runtime and cuBLAS calls that throw instead of exiting,
// as tiny-cuda-nn's CUDA_CHECK_THROW: the GUI and the executor turn a failure (an
// out-of-memory above all) into a result the user sees, never an abort.
//
//   CUDA_CHECK_THROW(cudaMalloc(&p, bytes));
//   kernel<<<grid, block, 0, stream>>>(...);
//   CUDA_CHECK_THROW(cudaGetLastError());
//   CUBLAS_CHECK_THROW(cublasSgemm(...));
//
// Header-only so that any gpu/ target can use it without linking the kernels.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace remat::cuda {

// A failed CUDA runtime or cuBLAS call. what() reads
// "gpu/kernels/linear.cu:42: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory)".
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& message, cudaError_t cuda_code, cublasStatus_t cublas_code)
      : std::runtime_error(message), cuda_code_(cuda_code), cublas_code_(cublas_code) {}

  // cudaSuccess when the failure came from cuBLAS, and the reverse.
  cudaError_t cuda_code() const noexcept { return cuda_code_; }
  cublasStatus_t cublas_code() const noexcept { return cublas_code_; }
  // The executor reports these as "needs X, had Y" rather than as a crash.
  bool out_of_memory() const noexcept {
    return cuda_code_ == cudaErrorMemoryAllocation || cublas_code_ == CUBLAS_STATUS_ALLOC_FAILED;
  }

 private:
  cudaError_t cuda_code_;
  cublasStatus_t cublas_code_;
};

namespace detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* expr, const char* file,
                                          int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                      " failed: " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")",
                  code, CUBLAS_STATUS_SUCCESS);
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* expr,
                                            const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                      " failed: " + cublasGetStatusName(status) + " (" +
                      cublasGetStatusString(status) + ")",
                  cudaSuccess, status);
}

}  // namespace detail
}  // namespace remat::cuda

#define CUDA_CHECK_THROW(expr)                                                         \
  do {                                                                                 \
    const cudaError_t remat_cuda_status_ = (expr);                                     \
    if (remat_cuda_status_ != cudaSuccess)                                             \
      ::remat::cuda::detail::throw_cuda_error(remat_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK_THROW(expr)                                                         \
  do {                                                                                   \
    const cublasStatus_t remat_cublas_status_ = (expr);                                  \
    if (remat_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::remat::cuda::detail::throw_cublas_error(remat_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
