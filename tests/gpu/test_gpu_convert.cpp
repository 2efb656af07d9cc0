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

// Mixed precision's element-wise steps (core/exec/mixed_call.h) against the
// CPU's bits: rounding in place, a 16-bit gradient plus an f32 term rounded
// once, the loss scale's product and the f32 sum of the weight gradients.
TEST_F(GpuKernels, MixedPrecisionStepsMatchTheCpuBitForBit) {
  const Vec x = probe(12);
  const auto n = static_cast<int64_t>(x.size());
  // Sums of finite values only (inf + -inf would be a NaN, whose payload is not promised to agree).
  const Vec a = random_vec(x.size(), 14, -4.0f, 4.0f), c = random_vec(x.size(), 13, -4.0f, 4.0f);
  for (bool bf16 : {true, false}) {
    const char* what = bf16 ? "bf16" : "f16";
    Vec want = x;
    if (bf16) cpu::round_bf16(want.data(), n);
    else cpu::round_f16(want.data(), n);
    Dev r(x);
    if (bf16) gpu::round_bf16(r.get(), n, stream_);
    else gpu::round_f16(r.get(), n, stream_);
    expect_bitwise(r.fetch(), want, what);

    // g (codes) += c: the CPU's add_stored, one rounding of the f32 sum.
    std::vector<uint16_t> g(x.size());
    if (bf16) cpu::f32_to_bf16(a.data(), g.data(), n);
    else cpu::f32_to_f16(a.data(), g.data(), n);
    Vec c16 = c;  // the term is already a value of the dtype (rounded first, as store_dx does)
    if (bf16) cpu::round_bf16(c16.data(), n);
    else cpu::round_f16(c16.data(), n);
    std::vector<uint16_t> sum(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      sum[i] = bf16 ? cpu::bf16_bits(cpu::bf16_value(g[i]) + c16[i]) : cpu::f16_bits(cpu::f16_value(g[i]) + c16[i]);
    DeviceArray<uint16_t> g_d(g);
    const Dev c_d(c16);
    if (bf16) gpu::add_to_bf16(g_d.get(), c_d.get(), n, stream_);
    else gpu::add_to_f16(g_d.get(), c_d.get(), n, stream_);
    EXPECT_EQ(g_d.fetch(), sum) << what << " add";
  }
  Vec scaled = a, summed = a;
  for (std::size_t i = 0; i < x.size(); ++i) {
    scaled[i] *= 65536.0f;
    summed[i] += c[i];
  }
  Dev s(a);
  gpu::scale_f32(s.get(), n, 65536.0f, stream_);
  expect_bitwise(s.fetch(), scaled, "scale");
  Dev y(a);
  const Dev c_d(c);
  gpu::add_f32(y.get(), c_d.get(), n, stream_);
  expect_bitwise(y.fetch(), summed, "add");
}
