// Add and dropout: elementwise ops with no parameters.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/rng.h"

namespace remat::cpu {
namespace {

// p == 1 is allowed (everything dropped); anything outside [0, 1] or NaN is a
// model error that should surface, not silently become a mask.
void check_p(float p) {
  if (!(p >= 0.0f && p <= 1.0f)) {
    throw std::invalid_argument("dropout: p must be in [0, 1], got " + std::to_string(p));
  }
}

// The scale is one float computed one way, so forward, backward and the CUDA
// mirror all multiply by the very same number.
float keep_scale(float p) { return 1.0f / (1.0f - p); }

}  // namespace

void add_fwd(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_into(const float* src, float* dst, int64_t n, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

bool dropout_keep(uint64_t seed, uint32_t op_id, uint64_t i, float p) {
  return rng_keep(seed, op_id, i, p);
}

void dropout_fwd(const float* x, float* y, int64_t n, float p, uint64_t seed, uint32_t op_id) {
  check_p(p);
  if (p == 0.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  const float scale = keep_scale(p);  // inf when p == 1, but then nothing is kept
  for (int64_t i = 0; i < n; ++i) {
    y[i] = rng_keep(seed, op_id, static_cast<uint64_t>(i), p) ? x[i] * scale : 0.0f;
  }
}

void dropout_bwd(const float* dy, float* dx, int64_t n, float p, uint64_t seed, uint32_t op_id,
                 bool accumulate) {
  check_p(p);
  if (p == 0.0f) {
    add_into(dy, dx, n, accumulate);
    return;
  }
  const float scale = keep_scale(p);
  for (int64_t i = 0; i < n; ++i) {
    const float v = rng_keep(seed, op_id, static_cast<uint64_t>(i), p) ? dy[i] * scale : 0.0f;
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

}  // namespace remat::cpu
