// Counter-based random numbers shared by the CPU and CUDA dropout kernels:
// a pure function of (seed, op, index), so a recomputed forward regenerates the
// same mask without storing it. Host and device compile the same code.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define REMAT_HD __host__ __device__ __forceinline__
#else
#define REMAT_HD inline
#endif

namespace remat {

// SplitMix64 finaliser: cheap, well mixed, identical on host and device.
REMAT_HD uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Callers check 0 <= p <= 1 first (a negative or NaN p makes the conversion
// below undefined). Seeds are meant to be below 2^32: larger ones can alias
// another (seed, op) pair through the XOR.
// Keep element i iff its 32-bit draw is at or above p·2³² (integer compare, so
// host and device agree without floating-point rounding questions).
REMAT_HD bool rng_keep(uint64_t seed, uint32_t op_id, uint64_t i, float p) {
  const uint64_t draw = mix64(mix64(seed ^ (static_cast<uint64_t>(op_id) << 32)) + i) >> 32;
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(p) * 4294967296.0);
  return draw >= threshold;
}

}  // namespace remat
