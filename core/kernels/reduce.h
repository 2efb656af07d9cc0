// Float sums accumulated in double, in a fixed order: eight interleaved lanes
// (element i goes to lane i % 8), then the lanes added 0..7, then the tail.
// Eight independent accumulators keep the adds from waiting on one another
// (a single chain is latency-bound), and the order depends only on n, so a
// result is the same on every call. Internal to the CPU kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

namespace remat::cpu {

// Σ f(i) for i in [0, n), f returning double.
template <class F>
inline double lane_sum(int64_t n, F f) {
  constexpr int64_t kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += f(i + j);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < kLanes; ++j) sum += lane[j];
  for (; i < n; ++i) sum += f(i);
  return sum;
}

// Σ f(i) and Σ g(i) in one pass over the data, each as lane_sum would.
template <class F, class G>
inline void lane_sum2(int64_t n, F f, G g, double& sum_f, double& sum_g) {
  constexpr int64_t kLanes = 8;
  double lf[kLanes] = {}, lg[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      lf[j] += f(i + j);
      lg[j] += g(i + j);
    }
  }
  sum_f = 0.0;
  sum_g = 0.0;
  for (int64_t j = 0; j < kLanes; ++j) {
    sum_f += lf[j];
    sum_g += lg[j];
  }
  for (; i < n; ++i) {
    sum_f += f(i);
    sum_g += g(i);
  }
}

// max over x[0, n) (-inf when n = 0): eight lanes, so that GCC vectorises it;
// a NaN is skipped (std::max keeps its first argument), as a one-lane loop.
inline float row_max(const float* x, int64_t n) {
  constexpr int64_t kLanes = 8;
  float lane[kLanes];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      lane[j] = lane[j] < v ? v : lane[j];  // std::max by value: GCC keeps the lanes in a register
    }
  }
  float mx = lane[0];
  for (int64_t j = 1; j < kLanes; ++j) mx = std::max(mx, lane[j]);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

// Σ x[i].
inline double sum_f64(const float* x, int64_t n) {
  return lane_sum(n, [x](int64_t i) { return static_cast<double>(x[i]); });
}

// Σ (x[i] − mean)².
inline double sum_sq_dev_f64(const float* x, int64_t n, double mean) {
  return lane_sum(n, [x, mean](int64_t i) {
    const double d = x[i] - mean;
    return d * d;
  });
}

// Σ a[i]·b[i].
inline double dot_f64(const float* a, const float* b, int64_t n) {
  return lane_sum(n, [a, b](int64_t i) { return static_cast<double>(a[i]) * b[i]; });
}

}  // namespace remat::cpu
