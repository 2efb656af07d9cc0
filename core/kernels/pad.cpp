// Padding, forward and backward, element by element through pad_index.h's
// rules (the CUDA kernels run the same functions, one thread per element).
#include "core/kernels/cpu_kernels.h"
#include "core/kernels/pad_index.h"

namespace remat::cpu {
namespace {

int64_t numel(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

}  // namespace

void pad_fwd(const PadGeom& g, const float* x, float* y) {
  const int64_t n = numel(g.out, g.rank);
  for (int64_t o = 0; o < n; ++o) y[o] = pad_read(g, x, o);
}

void pad_bwd(const PadGeom& g, const float* dy, float* dx, bool accumulate) {
  const int64_t n = numel(g.in, g.rank);
  if (accumulate)
    for (int64_t i = 0; i < n; ++i) dx[i] += pad_grad(g, dy, i);
  else
    for (int64_t i = 0; i < n; ++i) dx[i] = pad_grad(g, dy, i);
}

}  // namespace remat::cpu
