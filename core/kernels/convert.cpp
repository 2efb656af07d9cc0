// Bit-level conversions: the rounding is spelled out in integers, so it does
// not depend on the floating-point environment or on what the compiler
// vectorises.
#include "core/kernels/convert.h"

#include <cmath>
#include <cstring>

namespace remat::cpu {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Drops the low `shift` bits of `v`, rounding to nearest, ties to even.
uint32_t round_shift(uint32_t v, unsigned shift) {
  const uint32_t q = v >> shift, rem = v & ((1u << shift) - 1), half = 1u << (shift - 1);
  return q + (rem > half || (rem == half && (q & 1u)));
}

}  // namespace

uint16_t f16_bits(float x) {
  const uint32_t u = bits_of(x);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN: quiet
  // 65520 (halfway between 65504, the largest half, and 65536) and above round up to infinity.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a >= 0x38800000u)  // a normal half (>= 2^-14): rebias the exponent, round the mantissa
    return static_cast<uint16_t>(sign | round_shift(a - 0x38000000u, 13));
  // A subnormal half: units of 2^-24. Half of the smallest (2^-25) and below round to 0.
  if (a <= 0x33000000u) return sign;
  const uint32_t exponent = a >> 23;  // 102..112 here
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | round_shift(mantissa, 126 - exponent));
}

float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in f32
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));
  return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_bits(x[i]);
}
void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_value(x[i]);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_bits(x[i]);
}
void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_value(x[i]);
}

void round_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}
void round_f16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_f16(x[i]);
}

float int8_scale(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));  // fmax skips NaN
  return amax / 127.0f;
}

void f32_to_int8(const float* x, void* packed, int64_t n) {
  const float scale = int8_scale(x, n);
  std::memcpy(packed, &scale, 4);
  auto* q = static_cast<int8_t*>(packed) + 4;
  for (int64_t i = 0; i < n; ++i) {
    const float r = scale > 0 ? x[i] / scale : 0.0f;
    if (std::isnan(r)) {  // inf/inf, or a NaN element
      q[i] = 0;
      continue;
    }
    // |r| <= 127 up to the division's rounding (exact differences: |r| < 2^23).
    float c = std::trunc(r);
    const float d = std::fabs(r - c);
    if (d > 0.5f || (d == 0.5f && std::fmod(c, 2.0f) != 0.0f)) c += std::copysign(1.0f, r);
    q[i] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, c)));
  }
}

void int8_to_f32(const void* packed, float* y, int64_t n) {
  float scale;
  std::memcpy(&scale, packed, 4);
  const auto* q = static_cast<const int8_t*>(packed) + 4;
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace remat::cpu
