// The compressed checkpoints' conversions against references computed here
// another way: the nearest representable values found in double arithmetic,
// ties broken to the even code. Every f32 bit pattern class is visited:
// normals, the halfway cases, subnormals, overflow, infinities and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/kernels/convert.h"

using namespace remat::cpu;

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint32_t to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// bfloat16 by value: the two bf16 neighbours of x are the f32 values whose low
// 16 bits are zero just below and above |x| (in magnitude); pick the nearer in
// double, the one with an even code on a tie.
uint16_t bf16_reference(float x) {
  if (std::isnan(x)) return 0;  // checked separately
  const uint32_t u = to_bits(x);
  const uint32_t down = u & 0xffff0000u;
  const uint32_t up = down + 0x10000u;  // may reach the infinity pattern: that is its neighbour
  const double dx = std::fabs(static_cast<double>(x));
  const double d_down = dx - std::fabs(static_cast<double>(from_bits(down)));
  // Past the largest bf16 the next step is 2^128, which rounding calls infinity.
  const double up_value = (up & 0x7fffffffu) == 0x7f800000u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(from_bits(up)));
  const double d_up = up_value - dx;
  if (d_down < d_up) return static_cast<uint16_t>(down >> 16);
  if (d_up < d_down) return static_cast<uint16_t>(up >> 16);
  return static_cast<uint16_t>(((down >> 16) & 1u) ? up >> 16 : down >> 16);
}

// IEEE half by value: every finite half is k · 2^(e − 10) (k < 2048); round
// |x| / 2^(e − 10) to the nearest integer in double, ties to even, and encode.
uint16_t f16_reference(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(x)) return sign | 0x7c00;
  int e = a == 0 ? -30 : static_cast<int>(std::floor(std::log2(a)));
  if (a != 0 && std::ldexp(1.0, e) > a) --e;  // log2's rounding
  if (a != 0 && std::ldexp(1.0, e + 1) <= a) ++e;
  if (e < -14) e = -14;  // the subnormal range has the smallest normal's spacing
  const double ulp = std::ldexp(1.0, e - 10);
  double k = std::nearbyint(a / ulp);  // a / ulp is exact: a power-of-two scaling
  const double q = a / ulp;
  if (std::fabs(q - std::floor(q) - 0.5) == 0) k = std::fmod(std::floor(q), 2.0) == 0 ? std::floor(q) : std::floor(q) + 1;
  const double value = k * ulp;
  if (value > 65504.0) return sign | 0x7c00;
  if (value < std::ldexp(1.0, -14)) return static_cast<uint16_t>(sign | static_cast<uint16_t>(k));  // subnormal or zero
  int ve;
  const double m = std::frexp(value, &ve);  // value = m · 2^ve, m in [0.5, 1)
  const auto mant = static_cast<uint16_t>(std::ldexp(m, 11) - 1024);
  return static_cast<uint16_t>(sign | ((ve - 1 + 15) << 10) | mant);
}

std::vector<float> probe_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, -3.14159f, 1e-3f, 7.5e4f, 65504.0f, 65519.0f, 65520.0f,
                          65536.0f, 1e30f, -1e38f, 6e-8f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 3e-5f, 6.1e-5f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  // Exact ties for bf16 (low half 0x8000) with odd and even codes, and for
  // f16 (the 13 dropped bits 0x1000), around 1.
  v.push_back(from_bits(0x3f808000u));
  v.push_back(from_bits(0x3f818000u));
  v.push_back(from_bits(0x3f801000u));
  v.push_back(from_bits(0x3f803000u));
  v.push_back(std::ldexp(3.0f, -26));  // 1.5 · 2^-25: a subnormal-half tie region
  v.push_back(std::ldexp(1.0f, -25));  // exactly half the smallest half: rounds to 0
  v.push_back(std::ldexp(5.0f, -26));  // 1.25 · 2^-24: rounds to the smallest half
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(bits(rng));
    if (!std::isnan(x)) v.push_back(x);
  }
  std::uniform_real_distribution<float> near(-70000.0f, 70000.0f);
  for (int i = 0; i < 50000; ++i) v.push_back(near(rng));
  return v;
}

}  // namespace

TEST(Convert, Bf16MatchesTheNearestEvenReference) {
  for (float x : probe_values()) {
    ASSERT_EQ(bf16_bits(x), bf16_reference(x)) << x << " bits " << std::hex << to_bits(x);
    // Widening is exact: the code's value is the f32 with those upper 16 bits.
    ASSERT_EQ(to_bits(bf16_value(bf16_bits(x))), static_cast<uint32_t>(bf16_bits(x)) << 16);
  }
}

TEST(Convert, F16MatchesTheNearestEvenReference) {
  for (float x : probe_values()) {
    const uint16_t h = f16_bits(x);
    ASSERT_EQ(h, f16_reference(x)) << x << " bits " << std::hex << to_bits(x);
    // Round trip: widening then narrowing again gives the same code (the value is a half).
    ASSERT_EQ(f16_bits(f16_value(h)), h) << x;
  }
  EXPECT_EQ(f16_value(0x3c00), 1.0f);
  EXPECT_EQ(f16_value(0x7bff), 65504.0f);
  EXPECT_EQ(f16_value(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_value(0x8400), -std::ldexp(1.0f, -14));
}

TEST(Convert, NaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(nan))));
  EXPECT_TRUE(std::isnan(f16_value(f16_bits(nan))));
  EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(from_bits(0x7f800001u)))));  // a signalling payload that bf16 would drop
}

// The array forms are the scalar ones element by element, and a bf16 round
// trip of a tensor equals its reference rounding.
TEST(Convert, ArraysRoundTripAgainstTheReference) {
  const std::vector<float> x = probe_values();
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> packed(x.size());
  std::vector<float> back(x.size());
  f32_to_bf16(x.data(), packed.data(), n);
  bf16_to_f32(packed.data(), back.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(to_bits(back[i]), static_cast<uint32_t>(bf16_reference(x[i])) << 16) << i;
  f32_to_f16(x.data(), packed.data(), n);
  f16_to_f32(packed.data(), back.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(f16_bits(back[i]), f16_reference(x[i])) << i;
}

// int8: scale = max|x| / 127 in f32; each code the nearest integer to x / scale
// (f32 division), ties to even; back, code · scale.
TEST(Convert, Int8SymmetricPerTensorScale) {
  std::vector<float> x = {0.5f, -1.0f, 2.54f, -2.54f, 0.0f, 0.01f, 1.27f};
  // Ties: with max 2.54, scale = 0.02 (in f32); x = k · scale + scale/2 exactly
  // would need f32-exact halves, so build them from the scale itself.
  const float scale = 2.54f / 127.0f;
  x.push_back(2.5f * scale);   // 2.5 → 2 (even)
  x.push_back(-3.5f * scale);  // -3.5 → -4 (even)
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> packed(static_cast<std::size_t>(n) + 4);
  f32_to_int8(x.data(), packed.data(), n);
  float stored_scale;
  std::memcpy(&stored_scale, packed.data(), 4);
  EXPECT_EQ(stored_scale, scale);
  EXPECT_EQ(int8_scale(x.data(), n), scale);
  const auto* q = reinterpret_cast<const int8_t*>(packed.data() + 4);
  for (int64_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(x[static_cast<std::size_t>(i)] / scale);  // the same f32 division
    double want = std::floor(r);
    const double frac = r - want;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(want, 2.0) != 0)) want += 1;
    EXPECT_EQ(q[i], static_cast<int8_t>(want)) << i << " " << x[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(q[1], -50);   // -1 / 0.02
  EXPECT_EQ(q[2], 127);   // the largest magnitude maps to ±127
  EXPECT_EQ(q[3], -127);
  EXPECT_EQ(q[7], 2);
  EXPECT_EQ(q[8], -4);
  std::vector<float> back(static_cast<std::size_t>(n));
  int8_to_f32(packed.data(), back.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(back[static_cast<std::size_t>(i)], static_cast<float>(q[i]) * scale) << i;
  // All zeros: scale 0, codes 0, back to zeros.
  std::vector<float> zeros(5, 0.0f);
  std::vector<uint8_t> zp(9, 0xff);
  f32_to_int8(zeros.data(), zp.data(), 5);
  std::vector<float> zb(5, 1.0f);
  int8_to_f32(zp.data(), zb.data(), 5);
  for (float z : zb) EXPECT_EQ(z, 0.0f);
}
