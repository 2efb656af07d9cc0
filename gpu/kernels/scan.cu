// torch.cumsum on the device (cpu_kernels.h's cumsum_fwd, cumsum_bwd;
// core/kernels/scan.cpp): one thread per line along the axis, summing in
// double in the CPU's order (forward from the start, backward from the end),
// each output rounded to float: no atomics, the same bits every run and the
// CPU's.
#include <stdexcept>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

__global__ void cumsum_fwd_kernel(ScanGeom g, const float* __restrict__ x, float* __restrict__ y, int64_t lines) {
  const int64_t line = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (line >= lines) return;
  const int64_t at = (line / g.inner) * g.len * g.inner + line % g.inner;
  double sum = 0;
  for (int64_t i = 0; i < g.len; ++i) {
    sum = __dadd_rn(sum, static_cast<double>(x[at + i * g.inner]));
    y[at + i * g.inner] = static_cast<float>(sum);
  }
}

__global__ void cumsum_bwd_kernel(ScanGeom g, const float* __restrict__ dy, float* __restrict__ dx, int64_t lines,
                                  bool accumulate) {
  const int64_t line = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (line >= lines) return;
  const int64_t at = (line / g.inner) * g.len * g.inner + line % g.inner;
  double sum = 0;
  for (int64_t i = g.len; i-- > 0;) {
    sum = __dadd_rn(sum, static_cast<double>(dy[at + i * g.inner]));
    detail::store_grad(&dx[at + i * g.inner], static_cast<float>(sum), accumulate);
  }
}

}  // namespace

void cumsum_fwd(const ScanGeom& g, const float* x, float* y, cudaStream_t stream) {
  const int64_t lines = g.outer * g.inner;
  if (lines == 0 || g.len == 0) return;
  cumsum_fwd_kernel<<<detail::grid_for(lines), detail::kBlock, 0, stream>>>(g, x, y, lines);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void cumsum_bwd(const ScanGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream) {
  const int64_t lines = g.outer * g.inner;
  if (lines == 0 || g.len == 0) return;
  cumsum_bwd_kernel<<<detail::grid_for(lines), detail::kBlock, 0, stream>>>(g, dy, dx, lines, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
