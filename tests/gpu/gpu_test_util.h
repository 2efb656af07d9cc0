// Shared by the GPU kernel tests: device arrays, random inputs, element-wise
// comparison against the CPU reference, and the fixture that skips (or, under
// REMAT_REQUIRE_CUDA=1, fails) without a device and owns a stream and handle.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/cpu_kernels.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"
#include "tests/gpu/require_cuda.h"

namespace remat::gpu_testing {


namespace cpu = remat::cpu;
namespace gpu = remat::cuda;
using Act = remat::cpu::Act;
using Vec = std::vector<float>;

// Empty when a device can be used, else the reason (e.g. "CUDA driver version is
// insufficient for CUDA runtime version").
inline std::string device_unavailable() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so later checks start clean
    return cudaGetErrorString(err);
  }
  if (count == 0) return "0 devices";
  return {};
}

// Move-only device array for test data.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    if (n_ > 0) {
      CUDA_CHECK_THROW(cudaMalloc(&ptr_, n_ * sizeof(T)));
      CUDA_CHECK_THROW(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  // Waits for all queued work first.
  std::vector<T> fetch() const {
    std::vector<T> host(n_);
    CUDA_CHECK_THROW(cudaDeviceSynchronize());
    if (n_ > 0)
      CUDA_CHECK_THROW(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};
using Dev = DeviceArray<float>;

inline Vec random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline Vec nan_vec(size_t n) { return Vec(n, std::numeric_limits<float>::quiet_NaN()); }

// |got - want| ≤ tol + tol·|want| everywhere (NaN fails), as llm.c's test_gpt2.
inline void expect_close(const Vec& got, const Vec& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol + tol * std::fabs(want[i]))) {
      if (bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ; first at "
                     << first << ": gpu " << got[first] << ", cpu " << want[first];
}

inline void expect_bitwise(const Vec& a, const Vec& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

constexpr float kTol = 1e-4f;      // elementwise ops and small reductions
constexpr float kGemmTol = 1e-3f;  // big GEMMs: long dot products, other summation order

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = device_unavailable();
    REMAT_SKIP_WITHOUT_CUDA(why);
    CUDA_CHECK_THROW(cudaStreamCreate(&stream_));
    CUBLAS_CHECK_THROW(cublasCreate(&cublas_));
  }
  void TearDown() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace remat::gpu_testing
