// CUDA_CHECK_THROW / CUBLAS_CHECK_THROW and the launchers' argument checks. None of
// these needs a device (error strings are looked up by the runtime library, and bad
// arguments are rejected before any launch), so they run on every machine.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace {

namespace gpu = remat::cuda;

TEST(CudaCheck, CudaFailureThrowsWithFileLineAndName) {
  try {
    CUDA_CHECK_THROW(cudaErrorMemoryAllocation);
    FAIL() << "no exception";
  } catch (const gpu::CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test_cuda_check.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorMemoryAllocation"), std::string::npos) << what;
    EXPECT_EQ(e.cuda_code(), cudaErrorMemoryAllocation);
    EXPECT_EQ(e.cublas_code(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(e.out_of_memory());
  }
}

TEST(CudaCheck, CublasFailureThrowsWithStatusName) {
  try {
    CUBLAS_CHECK_THROW(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "no exception";
  } catch (const gpu::CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << what;
    EXPECT_EQ(e.cublas_code(), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_FALSE(e.out_of_memory());
  }
  EXPECT_THROW(CUBLAS_CHECK_THROW(CUBLAS_STATUS_ALLOC_FAILED), std::runtime_error);
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(CUDA_CHECK_THROW(cudaSuccess));
  EXPECT_NO_THROW(CUBLAS_CHECK_THROW(CUBLAS_STATUS_SUCCESS));
}

// The expression is evaluated exactly once.
TEST(CudaCheck, EvaluatesItsExpressionOnce) {
  int calls = 0;
  auto call = [&] {
    ++calls;
    return cudaSuccess;
  };
  CUDA_CHECK_THROW(call());
  EXPECT_EQ(calls, 1);
}

TEST(CudaArguments, DenseRejectsGelu) {
  EXPECT_THROW(gpu::dense_fwd(gpu::Act::GELU, nullptr, nullptr, nullptr, nullptr, 2, 3, 4,
                              nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gpu::dense_bwd(gpu::Act::GELU, nullptr, nullptr, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr, 2, 3, 4, false, nullptr, nullptr),
               std::invalid_argument);
}

TEST(CudaArguments, NegativeSizesAreRejected) {
  EXPECT_THROW(gpu::act_fwd(gpu::Act::ReLU, nullptr, nullptr, -1, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gpu::linear_fwd(nullptr, nullptr, nullptr, nullptr, 4, -3, 2, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gpu::layernorm_fwd(nullptr, nullptr, nullptr, nullptr, nullptr, -2, 8, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gpu::softmax_ce_bwd(nullptr, nullptr, nullptr, 3, -1, false, nullptr),
               std::invalid_argument);
}

TEST(CudaArguments, DropoutRejectsPOutsideUnitInterval) {
  EXPECT_THROW(gpu::dropout_fwd(nullptr, nullptr, 8, 1.5f, 1, 2, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gpu::dropout_bwd(nullptr, nullptr, 8, -0.1f, 1, 2, false, nullptr),
               std::invalid_argument);
}

TEST(CudaArguments, UnknownActivationIsRejected) {
  EXPECT_THROW(gpu::act_fwd(static_cast<gpu::Act>(42), nullptr, nullptr, 8, nullptr),
               std::invalid_argument);
}

TEST(CudaArguments, EmptyTensorsLaunchNothing) {
  // No device is touched for n == 0, so this holds on a machine without one.
  EXPECT_NO_THROW(gpu::act_fwd(gpu::Act::Tanh, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(gpu::add_into(nullptr, nullptr, 0, true, nullptr));
  EXPECT_NO_THROW(gpu::dropout_fwd(nullptr, nullptr, 0, 0.5f, 1, 2, nullptr));
  EXPECT_NO_THROW(gpu::layernorm_bwd(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, 0, 16, false, nullptr));
}

}  // namespace
