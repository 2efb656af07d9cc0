// One row's softmax as the Softmax kernel and the fused attention both form
// it: the row's max (skipping NaN), exp(x − max) into y, their sum in double
// in lane_sum's order, then y scaled by the float 1/sum. y may be x. Returns
// the max and the sum, from which attention keeps log Σ exp. Internal to the
// CPU kernels.
#pragma once
#include <cstdint>

#include "core/kernels/exp_nonpositive.h"
#include "core/kernels/reduce.h"

namespace remat::cpu {

struct RowSoftmax {
  float max;
  double sum;
};

inline RowSoftmax softmax_row(const float* x, float* y, int64_t n) {
  const float mx = row_max(x, n);
  // The exps in a loop of their own, which GCC vectorises; then their sum.
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - mx);
  const double sum = sum_f64(y, n);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  return {mx, sum};
}

}  // namespace remat::cpu
