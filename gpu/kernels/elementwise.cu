// Add, gradient accumulation and dropout. Dropout's mask is never stored: each
// element's keep bit is remat::rng_keep(seed, op_id, i, p) from core/kernels/rng.h,
// the same host/device function the CPU kernels use, so CPU and GPU masks and a
// recomputed forward all agree bit for bit.
#include <string>

#include "core/kernels/rng.h"
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

// ---- kernels ------------------------------------------------------------------

// y (n) = a (n) + b (n).
__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = a[i] + b[i];
}

// dst (n) += src (n).
__global__ void accumulate_kernel(const float* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] += src[i];
}

// out (n) = or += (keep(i) ? in·scale : 0) for in (n); forward and backward alike.
__global__ void dropout_kernel(const float* in, float* out, int64_t n, float p, float scale,
                               uint64_t seed, uint32_t op_id, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = rng_keep(seed, op_id, static_cast<uint64_t>(i), p) ? in[i] * scale : 0.0f;
    detail::store_grad(&out[i], v, accumulate);
  }
}

// ---- launchers ----------------------------------------------------------------

// p == 1 is allowed (everything dropped); NaN or anything outside [0, 1] is a
// model error, rejected with the CPU's message.
void check_p(const char* fn, float p) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw std::invalid_argument(std::string(fn) + ": p must be in [0, 1], got " +
                                std::to_string(p));
}

void dropout(const char* fn, const float* in, float* out, int64_t n, float p, uint64_t seed,
             uint32_t op_id, bool accumulate, cudaStream_t stream) {
  check_p(fn, p);
  detail::check_sizes(fn, {n});
  if (p == 0.0f) {  // identity, as the CPU's shortcut
    add_into(in, out, n, accumulate, stream);
    return;
  }
  if (n == 0) return;
  // The CPU's scale expression exactly (inf for p == 1, when nothing is kept).
  const float scale = 1.0f / (1.0f - p);
  dropout_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(in, out, n, p, scale, seed,
                                                                     op_id, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace

void add_fwd(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("add_fwd", {n});
  if (n == 0) return;
  add_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(a, b, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void add_into(const float* src, float* dst, int64_t n, bool accumulate, cudaStream_t stream) {
  detail::check_sizes("add_into", {n});
  if (n == 0) return;
  if (!accumulate) {
    if (src != dst)
      CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToDevice,
                                       stream));
    return;
  }
  accumulate_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(src, dst, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void dropout_fwd(const float* x, float* y, int64_t n, float p, uint64_t seed, uint32_t op_id,
                 cudaStream_t stream) {
  dropout("dropout_fwd", x, y, n, p, seed, op_id, /*accumulate=*/false, stream);
}

void dropout_bwd(const float* dy, float* dx, int64_t n, float p, uint64_t seed, uint32_t op_id,
                 bool accumulate, cudaStream_t stream) {
  dropout("dropout_bwd", dy, dx, n, p, seed, op_id, accumulate, stream);
}

}  // namespace remat::cuda
