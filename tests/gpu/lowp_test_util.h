// What the tests of the tensor-core kernels (test_gpu_gemm_lowp.cpp,
// test_gpu_conv_lowp.cpp) share: 16-bit operands as codes, their values, and
// the bound on a tensor-core sum (derived at the top of test_gpu_gemm_lowp.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kernels/convert.h"
#include "tests/gpu/gpu_test_util.h"  // gpu:: (the CUDA kernels)

namespace remat::gpu_testing {

using Codes = std::vector<uint16_t>;

// γ_n for a sum of `terms` exact products on tensor cores: n = 3·terms + 18, u = 2^-23.
inline double gamma_bound(int64_t terms) {
  const double n = 3.0 * static_cast<double>(terms) + 18.0;
  const double nu = n * 0x1p-23;
  return nu / (1.0 - nu);
}

inline double value_of(gpu::HalfType t, uint16_t c) {
  return t == gpu::HalfType::BF16 ? cpu::bf16_value(c) : cpu::f16_value(c);
}

// n values of magnitude in [1/64, 1], either sign (no subnormals in either
// format), as 16-bit codes.
inline Codes random_codes(gpu::HalfType t, std::size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mag(1.0f / 64, 1.0f);
  std::bernoulli_distribution neg(0.5);
  Codes c(n);
  for (auto& x : c) {
    const float v = neg(gen) ? -mag(gen) : mag(gen);
    x = t == gpu::HalfType::BF16 ? cpu::bf16_bits(v) : cpu::f16_bits(v);
  }
  return c;
}

}  // namespace remat::gpu_testing
