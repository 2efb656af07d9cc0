// Compressed checkpoints' conversions on the device, mirroring
// core/kernels/convert.h bit for bit: bf16 and f16 by the intrinsics that
// round to nearest, ties to even; int8 with one scale per tensor, max|x| / 127,
// each code x / scale (IEEE division: no fast math) rounded to nearest even.
// The maximum is order-independent, so the one-block reduction is exact.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

// ---- kernels ------------------------------------------------------------------

// y (n) = bf16(x) or f16(x), as raw 16-bit codes.
__global__ void to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}
__global__ void from_bf16_kernel(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
}
__global__ void to_f16_kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __half_as_ushort(__float2half_rn(x[i]));
}
__global__ void from_f16_kernel(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __half2float(__ushort_as_half(x[i]));
}

// scale (1) = max|x| / 127: one block, fmaxf (which skips NaN, as the CPU's fmax).
__global__ void int8_scale_kernel(const float* x, int64_t n, float* scale) {
  __shared__ float part[kBlock];
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *scale = part[0] / 127.0f;
}

// q (n) = x / scale to nearest even, within ±127; NaN → 0 (the CPU's rule).
__global__ void to_int8_kernel(const float* x, const float* scale, int8_t* q, int64_t n) {
  const float s = *scale;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float r = s > 0.0f ? x[i] / s : 0.0f;
    q[i] = isnan(r) ? int8_t{0} : static_cast<int8_t>(fminf(127.0f, fmaxf(-127.0f, rintf(r))));
  }
}

__global__ void from_int8_kernel(const int8_t* q, const float* scale, float* y, int64_t n) {
  const float s = *scale;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = static_cast<float>(q[i]) * s;
}

// Mixed precision's element-wise steps (core/exec/mixed_call.h): x rounded
// in place to bf16/f16 values; g (16-bit codes) += c, the sum in f32 rounded
// once; x *= s; y += x. One thread an element: no order to differ.
__global__ void round_bf16_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}
__global__ void round_f16_kernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __half2float(__float2half_rn(x[i]));
}
__global__ void add_bf16_kernel(uint16_t* g, const float* c, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    g[i] = __bfloat16_as_ushort(__float2bfloat16_rn(__fadd_rn(__bfloat162float(__ushort_as_bfloat16(g[i])), c[i])));
}
__global__ void add_f16_kernel(uint16_t* g, const float* c, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    g[i] = __half_as_ushort(__float2half_rn(__fadd_rn(__half2float(__ushort_as_half(g[i])), c[i])));
}
__global__ void scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __fmul_rn(x[i], s);
}
__global__ void add_f32_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __fadd_rn(y[i], x[i]);
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("f32_to_bf16", {n});
  if (n == 0) return;
  to_bf16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("bf16_to_f32", {n});
  if (n == 0) return;
  from_bf16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("f32_to_f16", {n});
  if (n == 0) return;
  to_f16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("f16_to_f32", {n});
  if (n == 0) return;
  from_f16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

// packed (4 + n bytes) = the f32 scale, then the n codes (core/kernels/convert.h).
void f32_to_int8(const float* x, void* packed, int64_t n, cudaStream_t stream) {
  detail::check_sizes("f32_to_int8", {n});
  auto* scale = static_cast<float*>(packed);
  int8_t* q = static_cast<int8_t*>(packed) + 4;
  int8_scale_kernel<<<1, kBlock, 0, stream>>>(x, n, scale);
  CUDA_CHECK_THROW(cudaGetLastError());
  if (n == 0) return;
  to_int8_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, scale, q, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void int8_to_f32(const void* packed, float* y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("int8_to_f32", {n});
  if (n == 0) return;
  const auto* scale = static_cast<const float*>(packed);
  const int8_t* q = static_cast<const int8_t*>(packed) + 4;
  from_int8_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(q, scale, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void round_bf16(float* x, int64_t n, cudaStream_t stream) {
  detail::check_sizes("round_bf16", {n});
  if (n == 0) return;
  round_bf16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void round_f16(float* x, int64_t n, cudaStream_t stream) {
  detail::check_sizes("round_f16", {n});
  if (n == 0) return;
  round_f16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void add_to_bf16(uint16_t* g, const float* c, int64_t n, cudaStream_t stream) {
  detail::check_sizes("add_to_bf16", {n});
  if (n == 0) return;
  add_bf16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(g, c, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void add_to_f16(uint16_t* g, const float* c, int64_t n, cudaStream_t stream) {
  detail::check_sizes("add_to_f16", {n});
  if (n == 0) return;
  add_f16_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(g, c, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void scale_f32(float* x, int64_t n, float s, cudaStream_t stream) {
  detail::check_sizes("scale_f32", {n});
  if (n == 0) return;
  scale_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(x, n, s);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void add_f32(float* y, const float* x, int64_t n, cudaStream_t stream) {
  detail::check_sizes("add_f32", {n});
  if (n == 0) return;
  add_f32_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(y, x, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
