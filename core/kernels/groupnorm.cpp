// Group normalisation over x (n, c, hw): statistics per (sample, group of
// c/groups channels), one contiguous run of (c/groups)·hw floats; the affine
// scale and shift are per channel. Reductions accumulate in double in a fixed
// order (reduce.h), as batchnorm.cpp does; y and dx read the rounded statistics.
#include <cmath>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/reduce.h"

namespace remat::cpu {

void groupnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean_out, float* rstd_out,
                   int64_t n, int64_t c, int64_t hw, int64_t groups, double eps) {
  const int64_t cg = c / groups, m = cg * hw;
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + (img * c + g * cg) * hw;
      float* yg = y + (img * c + g * cg) * hw;
      const double mean = sum_f64(xg, m) / static_cast<double>(m);
      const double var = sum_sq_dev_f64(xg, m, mean) / static_cast<double>(m);  // biased, as PyTorch
      const float mean_f = static_cast<float>(mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
      mean_out[img * groups + g] = mean_f;
      rstd_out[img * groups + g] = rstd;
      for (int64_t k = 0; k < cg; ++k) {
        const int64_t ch = g * cg + k;
        const float scale = rstd * (gamma ? gamma[ch] : 1.0f), shift = beta ? beta[ch] : 0.0f;
        for (int64_t i = 0; i < hw; ++i) yg[k * hw + i] = (xg[k * hw + i] - mean_f) * scale + shift;
      }
    }
  }
}

void groupnorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean_in, const float* rstd_in,
                   float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, int64_t groups,
                   bool accumulate) {
  const int64_t cg = c / groups, m = cg * hw;
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t at = (img * c + g * cg) * hw;
      const float mean = mean_in[img * groups + g], rstd = rstd_in[img * groups + g];
      // With x̂ = (x − mean)·rstd and dŷ = dy·γ:
      //   dx = rstd·(dŷ − Σdŷ/m − x̂·Σ(dŷ·x̂)/m);  dγ += Σ dy·x̂;  dβ += Σ dy.
      double sum_g = 0.0, dot_g = 0.0;
      for (int64_t k = 0; k < cg; ++k) {
        const int64_t ch = g * cg + k;
        const float* xr = x + at + k * hw;
        const float* dyr = dy + at + k * hw;
        double s = 0.0, d = 0.0;
        lane_sum2(
            hw, [dyr](int64_t i) { return static_cast<double>(dyr[i]); },
            [xr, dyr, mean](int64_t i) { return static_cast<double>(xr[i] - mean) * dyr[i]; }, s, d);
        if (dgamma) dgamma[ch] += static_cast<float>(d * rstd);
        if (dbeta) dbeta[ch] += static_cast<float>(s);
        const float gm = gamma ? gamma[ch] : 1.0f;
        sum_g += s * gm;
        dot_g += d * gm;
      }
      const float mean_g = static_cast<float>(sum_g / static_cast<double>(m));
      const float k2 = static_cast<float>(dot_g * rstd * rstd / static_cast<double>(m));  // x̂·Σ(dŷ·x̂)/m = (x − mean)·k2
      for (int64_t k = 0; k < cg; ++k) {
        const float gm = gamma ? gamma[g * cg + k] : 1.0f;
        const float* xr = x + at + k * hw;
        const float* dyr = dy + at + k * hw;
        float* dxr = dx + at + k * hw;
        for (int64_t i = 0; i < hw; ++i) {
          const float v = (dyr[i] * gm - mean_g - (xr[i] - mean) * k2) * rstd;
          dxr[i] = accumulate ? dxr[i] + v : v;
        }
      }
    }
  }
}

}  // namespace remat::cpu
