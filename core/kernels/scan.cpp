// torch.cumsum (cpu_kernels.h's cumsum_fwd, cumsum_bwd): a running sum along
// one axis of a dense (outer, len, inner) tensor, each line summed in double
// in axis order and every output rounded to float, as PyTorch's CPU kernel
// (cpu_cum_base_kernel accumulates in at::acc_type<float>, double); the
// backward is PyTorch's reversed_cumsum (flip, cumsum, flip): the same sum
// walked from the end. One line at a time: no two writes meet, the order is
// fixed (the CUDA kernel's, one thread per line).
#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {

void cumsum_fwd(const ScanGeom& g, const float* x, float* y) {
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.inner; ++j) {
      const int64_t at = o * g.len * g.inner + j;
      double sum = 0;
      for (int64_t i = 0; i < g.len; ++i) {
        sum += static_cast<double>(x[at + i * g.inner]);
        y[at + i * g.inner] = static_cast<float>(sum);
      }
    }
}

void cumsum_bwd(const ScanGeom& g, const float* dy, float* dx, bool accumulate) {
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.inner; ++j) {
      const int64_t at = o * g.len * g.inner + j;
      double sum = 0;
      for (int64_t i = g.len; i-- > 0;) {
        sum += static_cast<double>(dy[at + i * g.inner]);
        const float v = static_cast<float>(sum);
        float& d = dx[at + i * g.inner];
        d = accumulate ? d + v : v;
      }
    }
}

}  // namespace remat::cpu
