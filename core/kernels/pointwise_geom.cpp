// PwGeom's coalescing (cpu_kernels.h): the geometry a kernel walks with the
// fewest dimensions, so that a device thread divides its index once per
// dimension left rather than once per dimension of the op (a rank-4 tensor
// that every operand reads alike becomes one run). The CPU's loops merge the
// same dimensions as they walk (pointwise.cpp's Walk); the CUDA launchers
// take the coalesced geometry before they launch.
#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {

PwGeom coalesced(const PwGeom& g) {
  PwGeom out = g;
  out.rank = 0;
  for (int d = 0; d < g.rank; ++d) {
    if (g.shape[d] == 1) continue;  // index always 0: no offset, no order
    const int last = out.rank - 1;
    bool merge = last >= 0;
    for (int k = 0; merge && k < g.arity; ++k) {
      // Both kept or both broadcast (a broadcast dimension's dims are 1, its
      // stride 0: an operand that reads one element along a kept dimension
      // through stride 0 is still kept there, its gradient has that length).
      const bool kept_last = out.dims[k][last] != 1, kept_d = g.dims[k][d] != 1;
      merge = kept_last == kept_d && out.stride[k][last] == g.stride[k][d] * g.shape[d];
    }
    if (merge && g.out_strided) merge = out.out_stride[last] == g.out_stride[d] * g.shape[d];
    if (merge) {
      out.shape[last] *= g.shape[d];
      for (int k = 0; k < g.arity; ++k) {
        out.dims[k][last] *= g.dims[k][d];
        out.stride[k][last] = g.stride[k][d];
      }
      out.out_stride[last] = g.out_stride[d];
      continue;
    }
    const int n = out.rank++;
    out.shape[n] = g.shape[d];
    for (int k = 0; k < 3; ++k) {
      out.dims[k][n] = k < g.arity ? g.dims[k][d] : 1;
      out.stride[k][n] = k < g.arity ? g.stride[k][d] : 0;
    }
    out.out_stride[n] = g.out_stride[d];
  }
  for (int d = out.rank; d < PwGeom::kMaxRank; ++d) {
    out.shape[d] = 0;
    out.out_stride[d] = 0;
    for (int k = 0; k < 3; ++k) out.dims[k][d] = 0, out.stride[k][d] = 0;
  }
  return out;
}

}  // namespace remat::cpu
