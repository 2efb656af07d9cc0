// Padding (cpu_kernels.h: pad_fwd/bwd) through the CPU's own index rules
// (core/kernels/pad_index.h): one thread per output element forward, one per
// input element backward, which gathers in the CPU's (PyTorch's) order the
// gradient of every output that read it — no atomics, the CPU's bits.
#include "core/kernels/pad_index.h"
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

__global__ void pad_fwd_kernel(PadGeom g, const float* x, float* y, int64_t total) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x)
    y[e] = pad_read(g, x, e);
}

__global__ void pad_bwd_kernel(PadGeom g, const float* dy, float* dx, int64_t total, bool accumulate) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const float v = pad_grad(g, dy, e);
    dx[e] = accumulate ? __fadd_rn(dx[e], v) : v;
  }
}

int64_t numel(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

}  // namespace

void pad_fwd(const PadGeom& g, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = numel(g.out, g.rank);
  if (total == 0) return;
  pad_fwd_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(g, x, y, total);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void pad_bwd(const PadGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream) {
  const int64_t total = numel(g.in, g.rank);
  if (total == 0) return;
  pad_bwd_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(g, dy, dx, total, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
