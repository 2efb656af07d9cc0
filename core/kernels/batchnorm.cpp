// Batch normalisation in training mode over x (n, c, hw): statistics per
// channel over its n·hw values. A channel is n runs of hw contiguous floats
// (about 100 KB in a ResNet's first stage), so the several passes over one
// channel read it from cache. Reductions accumulate in double (reduce.h), in
// a fixed order, as layernorm.cpp does.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/reduce.h"

namespace remat::cpu {

void batchnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                   float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c, int64_t hw,
                   float eps, float momentum) {
  const int64_t m = n * hw;
  // As torch.nn.functional.batch_norm: one value per channel has no variance
  // to normalise by (and its unbiased variance divides by zero).
  if (m < 2) {
    throw std::invalid_argument("batchnorm: training needs more than one value per channel (n*hw = " +
                                std::to_string(m) + ")");
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t img = 0; img < n; ++img) sum += sum_f64(x + (img * c + ch) * hw, hw);
    const double mean = sum / static_cast<double>(m);
    // Two passes rather than E[x²] − E[x]², which cancels badly for a large mean.
    double sq = 0.0;
    for (int64_t img = 0; img < n; ++img) sq += sum_sq_dev_f64(x + (img * c + ch) * hw, hw, mean);
    const double var = sq / static_cast<double>(m);  // biased: what normalises
    const float mean_f = static_cast<float>(mean);
    const float invstd = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    save_mean[ch] = mean_f;
    save_invstd[ch] = invstd;
    // y from the rounded statistics, the very values the backward will read.
    const float scale = invstd * (gamma ? gamma[ch] : 1.0f);
    const float shift = beta ? beta[ch] : 0.0f;
    for (int64_t img = 0; img < n; ++img) {
      const float* xr = x + (img * c + ch) * hw;
      float* yr = y + (img * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) yr[i] = (xr[i] - mean_f) * scale + shift;
    }
    // In double, as PyTorch's CPU kernel; the running variance is unbiased.
    const double mom = momentum;
    if (running_mean != nullptr) {
      running_mean[ch] = static_cast<float>(mom * mean + (1.0 - mom) * running_mean[ch]);
    }
    if (running_var != nullptr) {
      const double unbiased = sq / static_cast<double>(m - 1);
      running_var[ch] = static_cast<float>(mom * unbiased + (1.0 - mom) * running_var[ch]);
    }
  }
}

void batchnorm_bwd(const float* x, const float* dy, const float* gamma, const float* save_mean,
                   const float* save_invstd, float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw,
                   bool accumulate) {
  const int64_t m = n * hw;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mean = save_mean[ch];
    const float invstd = save_invstd[ch];
    // With x̂ = (x − mean)·invstd:  dgamma = Σ dy·x̂,  dbeta = Σ dy,
    //   dx = invstd·gamma · (dy − Σdy/m − x̂·Σ(dy·x̂)/m).
    double sum_dy = 0.0, dot = 0.0;  // dot = Σ dy·(x − mean)
    for (int64_t img = 0; img < n; ++img) {
      const float* xr = x + (img * c + ch) * hw;
      const float* dyr = dy + (img * c + ch) * hw;
      double s = 0.0, d = 0.0;
      lane_sum2(
          hw, [dyr](int64_t i) { return static_cast<double>(dyr[i]); },
          [xr, dyr, mean](int64_t i) { return static_cast<double>(xr[i] - mean) * dyr[i]; }, s, d);
      sum_dy += s;
      dot += d;
    }
    if (dgamma) dgamma[ch] += static_cast<float>(dot * invstd);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
    const float mean_dy = static_cast<float>(sum_dy / static_cast<double>(m));
    // (x − mean)·k = x̂·Σ(dy·x̂)/m, with k = invstd²·dot/m.
    const float k = static_cast<float>(dot * invstd * invstd / static_cast<double>(m));
    const float scale = invstd * (gamma ? gamma[ch] : 1.0f);
    for (int64_t img = 0; img < n; ++img) {
      const float* xr = x + (img * c + ch) * hw;
      const float* dyr = dy + (img * c + ch) * hw;
      float* dxr = dx + (img * c + ch) * hw;
      if (accumulate) {
        for (int64_t i = 0; i < hw; ++i) dxr[i] += (dyr[i] - mean_dy - (xr[i] - mean) * k) * scale;
      } else {
        for (int64_t i = 0; i < hw; ++i) dxr[i] = (dyr[i] - mean_dy - (xr[i] - mean) * k) * scale;
      }
    }
  }
}

}  // namespace remat::cpu
