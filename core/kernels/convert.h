// Compressed checkpoints' conversions (docs/memory-model.md#compressed-checkpoints):
// f32 to bfloat16, IEEE half or int8 and back, on host arrays. Deterministic
// and exact to the bit: the CUDA kernels (gpu/kernels/convert.cu) use the
// same rules (__float2bfloat16_rn, __float2half_rn, __float2int_rn) and are
// tested against these.
#pragma once
#include <cstdint>
#include <cstring>

namespace remat::cpu {

// Round to nearest, ties to even; overflow goes to infinity, a NaN stays a
// (quiet) NaN with its sign, subnormals are kept (f16) and not flushed.
// bf16's two are inline: the CPU backend converts every element of a bf16
// tensor it reads or writes, and a call per element across translation units
// took nearly half of a bf16 run's time (`remat run` of resnet:18:16:32:8:10:bf16
// on the CPU, tests/bench/commands.sh: 0.53x the wall time once inline).
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet
  // Carrying into the exponent is right: the largest finite values round to infinity.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint16_t f16_bits(float x);
float f16_value(uint16_t h);

void f32_to_bf16(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n);
void f32_to_f16(const float* x, uint16_t* y, int64_t n);
void f16_to_f32(const uint16_t* x, float* y, int64_t n);

// x as a bf16 (f16) store keeps it, widened back: the rounding mixed
// precision applies where it stores a low-precision tensor (in place for the
// array forms).
inline float round_bf16(float x) { return bf16_value(bf16_bits(x)); }
inline float round_f16(float x) { return f16_value(f16_bits(x)); }
void round_bf16(float* x, int64_t n);
void round_f16(float* x, int64_t n);

// Symmetric int8 with one scale per tensor: scale = max|x| / 127 (f32),
// q = x / scale rounded to nearest, ties to even, in [-127, 127] (0 when
// the tensor is all zeros, scale 0). `packed` is 4 + n bytes: the f32 scale,
// then the n codes. Back: x = q · scale. Non-finite values are outside the
// scheme: an infinite max gives scale inf and codes 0 (NaN codes are 0).
float int8_scale(const float* x, int64_t n);
void f32_to_int8(const float* x, void* packed, int64_t n);
void int8_to_f32(const void* packed, float* y, int64_t n);

}  // namespace remat::cpu
