// Scalar losses: MSE, binary cross-entropy on logits and softmax cross-entropy. The loss sums accumulate in
// double so the reported value does not drift with batch size.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

// An out-of-range label would read outside the row; say which one instead.
int64_t checked_label(const int32_t* labels, int64_t r, int64_t classes) {
  const int32_t y = labels[r];
  if (y < 0 || y >= classes) {
    throw std::out_of_range("softmax_ce: label " + std::to_string(y) + " at row " +
                            std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
  }
  return y;
}

// Subtracting the row max keeps exp() from overflowing for large logits.
// Returns max and log Σ exp(x - max) of one row.
struct RowLse {
  float max;
  double log_sum;
};

RowLse row_lse(const float* xr, int64_t classes) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < classes; ++c) mx = xr[c] > mx ? xr[c] : mx;
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(xr[c] - mx));
  return {mx, std::log(sum)};
}

}  // namespace

float mse_fwd(const float* x, const float* target, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - target[i];
    sum += d * d;
  }
  return static_cast<float>(sum / static_cast<double>(n));
}

void mse_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate) {
  const float k = 2.0f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = k * (x[i] - target[i]);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

float bce_logits_fwd(const float* x, const float* target, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    sum += std::max(v, 0.0) - v * target[i] + std::log1p(std::exp(-std::fabs(v)));
  }
  return static_cast<float>(sum / static_cast<double>(n));
}

void bce_logits_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate) {
  const float count = static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = (1.0f / (1.0f + std::exp(-x[i])) - target[i]) / count;
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

namespace {

// One row's loss from its max and log Σ exp(x − max): −log p_y = max + log_sum − x_y;
// smoothed, plus ε·(max + log_sum − mean_c x_c) with the mean taken of x − max in double.
double row_ce(const float* xr, int64_t y, int64_t classes, const RowLse& s, double eps) {
  const double nll = static_cast<double>(s.max - xr[y]) + s.log_sum;
  if (eps == 0) return nll;
  double shifted = 0.0;
  for (int64_t c = 0; c < classes; ++c) shifted += static_cast<double>(xr[c] - s.max);
  const double smooth = s.log_sum - shifted / static_cast<double>(classes);
  return (1.0 - eps) * nll + eps * smooth;
}

}  // namespace

float softmax_ce_fwd(const float* logits, const int32_t* labels, int64_t rows, int64_t classes, double label_smoothing) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * classes;
    const int64_t y = checked_label(labels, r, classes);
    total += row_ce(xr, y, classes, row_lse(xr, classes), label_smoothing);
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

// (p_c − target_c) / rows with target_c = (1 − ε)·[c = y] + ε/classes; ε = 0
// subtracts exact zeros, so the plain loss keeps its bits.
void softmax_ce_bwd(const float* logits, const int32_t* labels, float* dx, int64_t rows,
                    int64_t classes, bool accumulate, double label_smoothing) {
  const double inv_rows = 1.0 / static_cast<double>(rows);
  const double hit = 1.0 - label_smoothing, spread = label_smoothing / static_cast<double>(classes);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * classes;
    float* dxr = dx + r * classes;
    const int64_t y = checked_label(labels, r, classes);
    const RowLse s = row_lse(xr, classes);
    for (int64_t c = 0; c < classes; ++c) {
      const double prob = std::exp(static_cast<double>(xr[c] - s.max) - s.log_sum);
      const float v = static_cast<float>(((c == y ? prob - hit : prob) - spread) * inv_rows);
      dxr[c] = accumulate ? dxr[c] + v : v;
    }
  }
}

float softmax_ce_fwd_keep_logp(const float* logits, const int32_t* labels, float* logp, int64_t rows,
                               int64_t classes, double label_smoothing) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * classes;
    float* lr = logp + r * classes;
    const int64_t y = checked_label(labels, r, classes);
    const RowLse s = row_lse(xr, classes);
    for (int64_t c = 0; c < classes; ++c) lr[c] = static_cast<float>(static_cast<double>(xr[c] - s.max) - s.log_sum);
    total += row_ce(xr, y, classes, s, label_smoothing);
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

void softmax_ce_bwd_from_logp(const float* logp, const int32_t* labels, float* dx, int64_t rows, int64_t classes,
                              bool accumulate, double label_smoothing) {
  const double inv_rows = 1.0 / static_cast<double>(rows);
  const double hit = 1.0 - label_smoothing, spread = label_smoothing / static_cast<double>(classes);
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logp + r * classes;
    float* dxr = dx + r * classes;
    const int64_t y = checked_label(labels, r, classes);
    for (int64_t c = 0; c < classes; ++c) {
      const double prob = std::exp(static_cast<double>(lr[c]));
      const float v = static_cast<float>(((c == y ? prob - hit : prob) - spread) * inv_rows);
      dxr[c] = accumulate ? dxr[c] + v : v;
    }
  }
}

}  // namespace remat::cpu
