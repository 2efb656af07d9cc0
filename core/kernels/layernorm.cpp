// LayerNorm over the last dimension. Row reductions accumulate in double: the
// reference should be as close to the exact value as is cheap, since the CUDA
// kernels are judged against it, and a fixed sequential order keeps it
// reproducible.
#include <cmath>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {

void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* stats,
                   int64_t rows, int64_t cols, double eps) {
  float* mean_out = stats;         // (rows)
  float* rstd_out = stats + rows;  // (rows)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mean = sum / static_cast<double>(cols);
    // Two passes rather than E[x²] - E[x]², which cancels badly for rows with a
    // large mean.
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = xr[c] - mean;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(cols);  // biased, as PyTorch
    const float m = static_cast<float>(mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    mean_out[r] = m;
    rstd_out[r] = rstd;
    // y is computed from the rounded stats, the same values backward will read.
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rstd * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
  }
}

void layernorm_bwd(const float* x, const float* stats, const float* gamma, const float* dy,
                   float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                   bool accumulate) {
  const float* mean_in = stats;
  const float* rstd_in = stats + rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float m = mean_in[r];
    const float rstd = rstd_in[r];
    // With x̂ = (x - mean)·rstd and g = dy·gamma:
    //   dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)).
    double sum_g = 0.0;
    double sum_gx = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * rstd;
      const float g = dyr[c] * (gamma ? gamma[c] : 1.0f);
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
      if (dgamma) dgamma[c] += dyr[c] * xhat;
      if (dbeta) dbeta[c] += dyr[c];
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(cols));
    const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * rstd;
      const float v = rstd * (dyr[c] * (gamma ? gamma[c] : 1.0f) - mean_g - xhat * mean_gx);
      dxr[c] = accumulate ? dxr[c] + v : v;
    }
  }
}

}  // namespace remat::cpu
