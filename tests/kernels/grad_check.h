// Shared helpers of the kernel tests: random inputs, float64 central finite
// differences, and the tolerance every gradient is held to.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace remat::cpu::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2.0f,
                                        float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Σ w·y in double: the scalar whose gradient w.r.t. y is w, so feeding w as dy
// to a backward kernel must give the gradient of this objective.
inline double weighted_sum(const std::vector<double>& y, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

// Central differences of f with respect to every element of v, in float64 so
// that the reference is far more accurate than the float32 kernel under test.
inline std::vector<double> numeric_grad(std::vector<double>& v, const std::function<double()>& f,
                                        double h = 1e-6) {
  std::vector<double> g(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = f();
    v[i] = saved - h;
    const double down = f();
    v[i] = saved;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

inline void expect_grad_near(const std::vector<float>& analytic, const std::vector<double>& numeric,
                             const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  for (size_t i = 0; i < numeric.size(); ++i) {
    EXPECT_NEAR(analytic[i], numeric[i], 1e-3 * (1.0 + std::abs(numeric[i])))
        << what << "[" << i << "]";
  }
}

// A non-zero pattern to start gradient buffers from, so that a kernel which
// forgets to overwrite (or to add) shows up.
inline std::vector<float> garbage(size_t n) { return random_floats(n, 0xBAD5EEDu, 5.0f, 9.0f); }

}  // namespace remat::cpu::test
