// The CUDA conversions of compressed checkpoints against the CPU's, bit for
// bit (core/kernels/convert.h): random values over the whole f32 range, the
// rounding ties, subnormals, overflow and an all-zero tensor for int8.
// Without a usable device each test skips with the runtime's reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/kernels/convert.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using namespace remat::gpu_testing;  // NOLINT: the fixture and helpers of every GPU kernel test

Vec probe(uint32_t seed) {
  Vec v = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e30f, 6e-8f, 2.98e-8f, std::numeric_limits<float>::max(),
           std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity()};
  uint32_t ties[] = {0x3f808000u, 0x3f818000u, 0x3f801000u, 0x3f803000u};
  for (uint32_t t : ties) {
    float x;
    std::memcpy(&x, &t, 4);
    v.push_back(x);
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> bits;
  while (v.size() < 100000) {
    const uint32_t u = bits(rng);
    float x;
    std::memcpy(&x, &u, 4);
    if (!std::isnan(x)) v.push_back(x);  // NaN payloads are not promised to agree
  }
  return v;
}

}  // namespace

TEST_F(GpuKernels, Bf16AndF16MatchTheCpuBitForBit) {
  const Vec x = probe(11);
  const auto n = static_cast<int64_t>(x.size());
  const Dev x_d(x);
  for (bool bf16 : {true, false}) {
    std::vector<uint16_t> want(x.size());
    if (bf16) cpu::f32_to_bf16(x.data(), want.data(), n);
    else cpu::f32_to_f16(x.data(), want.data(), n);
    DeviceArray<uint16_t> codes(std::vector<uint16_t>(x.size(), 0));
    if (bf16) gpu::f32_to_bf16(x_d.get(), codes.get(), n, stream_);
    else gpu::f32_to_f16(x_d.get(), codes.get(), n, stream_);
    EXPECT_EQ(codes.fetch(), want) << (bf16 ? "bf16" : "f16");
    Vec back_cpu(x.size());
    if (bf16) cpu::bf16_to_f32(want.data(), back_cpu.data(), n);
    else cpu::f16_to_f32(want.data(), back_cpu.data(), n);
    Dev back(nan_vec(x.size()));
    if (bf16) gpu::bf16_to_f32(codes.get(), back.get(), n, stream_);
    else gpu::f16_to_f32(codes.get(), back.get(), n, stream_);
    expect_bitwise(back.fetch(), back_cpu, bf16 ? "bf16 back" : "f16 back");
  }
}

TEST_F(GpuKernels, Int8MatchesTheCpuBitForBit) {
  for (const Vec& x : {random_vec(100003, 5, -3.0f, 3.0f), Vec(1000, 0.0f), Vec{-1.0f, 0.5f, 0.25f}}) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> want(x.size() + 4);
    cpu::f32_to_int8(x.data(), want.data(), n);
    const Dev x_d(x);
    DeviceArray<uint8_t> packed(std::vector<uint8_t>(x.size() + 4, 0xee));
    gpu::f32_to_int8(x_d.get(), packed.get(), n, stream_);
    EXPECT_EQ(packed.fetch(), want);
    Vec back_cpu(x.size());
    cpu::int8_to_f32(want.data(), back_cpu.data(), n);
    Dev back(nan_vec(x.size()));
    gpu::int8_to_f32(packed.get(), back.get(), n, stream_);
    expect_bitwise(back.fetch(), back_cpu, "int8 back");
  }
}
