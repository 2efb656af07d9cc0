// Elementwise by a constant that repeats over the input (attention's scale, a
// position table), mirroring core/kernels/constants.cpp: x / c divides, and a
// learned constant's gradient sums its repeats in increasing order per thread,
// so the bits are the CPU's order without atomics.
#include <stdexcept>
#include <string>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

// ---- kernels ------------------------------------------------------------------

// y (n) = x (n) ∘ c (cn, repeating); op 0 = ·, 1 = /, 2 = +.
__global__ void const_fwd_kernel(int op, const float* x, const float* c, float* y, int64_t n, int64_t cn) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float k = c[i % cn];
    y[i] = op == 0 ? x[i] * k : op == 1 ? x[i] / k : x[i] + k;
  }
}

// dx (n) = or += dy·c, dy/c or dy.
__global__ void const_bwd_kernel(int op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn,
                                 bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float k = c[i % cn];
    const float v = op == 0 ? dy[i] * k : op == 1 ? dy[i] / k : dy[i];
    detail::store_grad(&dx[i], v, accumulate);
  }
}

// dc (cn) += Σ_r dy (r·cn + j), one thread per j.
__global__ void const_param_grad_kernel(const float* dy, float* dc, int64_t n, int64_t cn) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cn;
       j += int64_t{gridDim.x} * blockDim.x) {
    float acc = dc[j];
    for (int64_t base = 0; base < n; base += cn) acc += dy[base + j];
    dc[j] = acc;
  }
}

void check_repeat(const char* fn, int64_t n, int64_t cn) {
  detail::check_sizes(fn, {n, cn});
  if (cn <= 0 || n % cn != 0)
    throw std::invalid_argument(std::string(fn) + ": the constant's " + std::to_string(cn) +
                                " values do not repeat over " + std::to_string(n) + " elements");
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void const_fwd(ConstOp op, const float* x, const float* c, float* y, int64_t n, int64_t cn, cudaStream_t stream) {
  check_repeat("const_fwd", n, cn);
  if (n == 0) return;
  const_fwd_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(static_cast<int>(op), x, c, y, n, cn);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void const_bwd(ConstOp op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn, bool accumulate,
               cudaStream_t stream) {
  check_repeat("const_bwd", n, cn);
  if (n == 0) return;
  const_bwd_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(static_cast<int>(op), dy, c, dx, n, cn, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void const_add_param_grad(const float* dy, float* dc, int64_t n, int64_t cn, cudaStream_t stream) {
  check_repeat("const_add_param_grad", n, cn);
  if (n == 0) return;
  const_param_grad_kernel<<<detail::grid_for(cn), kBlock, 0, stream>>>(dy, dc, n, cn);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
