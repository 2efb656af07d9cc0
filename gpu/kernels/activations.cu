// Elementwise activations: ReLU, Tanh, exact GELU (erf form) and None (copy).
// The functions themselves live in device_common.cuh, shared with dense's epilogue.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

// ---- kernels ------------------------------------------------------------------

// y (n) = act(x (n)).
template <Act A>
__global__ void act_fwd_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = detail::act_forward<A>(x[i]);
}

// dx (n) = or += act'(·) · dy (n); x_or_y (n) is y for ReLU/Tanh, x for GELU.
template <Act A>
__global__ void act_bwd_kernel(const float* x_or_y, const float* dy, float* dx, int64_t n,
                               bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&dx[i], detail::act_backward<A>(A == Act::None ? 0.0f : x_or_y[i], dy[i]),
                       accumulate);
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void act_fwd(Act act, const float* x, float* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("act_fwd", {n});
  detail::dispatch_act("act_fwd", act, [&](auto tag) {
    if (n == 0) return;
    act_fwd_kernel<decltype(tag)::value><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(
        x, y, n);
    CUDA_CHECK_THROW(cudaGetLastError());
  });
}

void act_bwd(Act act, const float* x_or_y, const float* dy, float* dx, int64_t n,
             bool accumulate, cudaStream_t stream) {
  detail::check_sizes("act_bwd", {n});
  detail::dispatch_act("act_bwd", act, [&](auto tag) {
    if (n == 0) return;
    act_bwd_kernel<decltype(tag)::value><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(
        x_or_y, dy, dx, n, accumulate);
    CUDA_CHECK_THROW(cudaGetLastError());
  });
}

}  // namespace remat::cuda
