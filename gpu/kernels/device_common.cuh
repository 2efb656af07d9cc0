// Helpers shared by the kernel files (private to gpu/kernels): launch geometry,
// argument checks, activation functions and fixed-order reductions. Results must
// be bit-identical from run to run, so every reduction here has one tree that
// depends only on the launch shape, never on scheduling (no atomics).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda::detail {

// ---- launch geometry and checks (host) ------------------------------------------

constexpr int kBlock = 256;
// Elementwise kernels use grid-stride loops, so the grid can be capped: each
// element's result does not depend on which thread computes it.
constexpr int64_t kMaxBlocks = 65536;

inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Elementwise kernels that take kUnroll elements a thread at a time
// (for_each_unrolled) launch a quarter of the threads.
constexpr int kUnroll = 4;
inline unsigned grid_unrolled(int64_t n) { return grid_for((n + kUnroll - 1) / kUnroll); }

inline void check_sizes(const char* fn, std::initializer_list<int64_t> sizes) {
  for (const int64_t s : sizes)
    if (s < 0) throw std::invalid_argument(std::string(fn) + ": negative size " + std::to_string(s));
}

// Calls f(std::integral_constant<Act, A>{}) so kernels can be templated on the
// activation instead of switching per element.
template <typename F>
void dispatch_act(const char* fn, Act act, F&& f) {
  switch (act) {
    case Act::None: f(std::integral_constant<Act, Act::None>{}); return;
    case Act::ReLU: f(std::integral_constant<Act, Act::ReLU>{}); return;
    case Act::Tanh: f(std::integral_constant<Act, Act::Tanh>{}); return;
    case Act::GELU: f(std::integral_constant<Act, Act::GELU>{}); return;
    case Act::Sigmoid: f(std::integral_constant<Act, Act::Sigmoid>{}); return;
    case Act::SiLU: f(std::integral_constant<Act, Act::SiLU>{}); return;
  }
  throw std::invalid_argument(std::string(fn) + ": unknown activation " +
                              std::to_string(static_cast<int>(act)));
}

// ---- GEMMs (host; gemm.cu) --------------------------------------------------------

// Pins what could change a cuBLAS result on the caller's handle (host pointers,
// no atomics, no TF32) and sets its stream only when it differs: cublasSetStream
// drops a workspace the caller set with cublasSetWorkspace.
void bind_cublas(cublasHandle_t cublas, cudaStream_t stream);
// A row-major c (batch of m x n, stride_c apart; < 0: dense) = a product with
// nothing to compute: true when batch, m or n is 0 (nothing written) or k is
// 0 (c zeroed unless beta is 1); false otherwise, the caller's GEMM to run.
bool empty_product(float* c, int64_t batch, int64_t m, int64_t n, int64_t k, float beta, cudaStream_t stream,
                   int64_t stride_c);

// Row-major c (batch, m, n) = op(a)·op(b) + beta·c with cuBLAS strided-batched
// SGEMM (no TF32, no atomics): a stored (m, k), or (k, m) when trans_a; b stored
// (k, n), or (n, k) when trans_b; batch strides are the matrices' sizes unless
// given (0: the same matrix for every batch entry).
void gemm_rm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
             bool trans_a, bool trans_b, float beta, cublasHandle_t cublas, cudaStream_t stream,
             int64_t stride_a = -1, int64_t stride_b = -1, int64_t stride_c = -1);

// ---- activations (device) -------------------------------------------------------

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

template <Act A>
__device__ __forceinline__ float act_forward(float x) {
  if constexpr (A == Act::ReLU) return x > 0.0f ? x : 0.0f;
  else if constexpr (A == Act::Tanh) return tanhf(x);
  else if constexpr (A == Act::GELU) return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  else if constexpr (A == Act::Sigmoid) return 1.0f / (1.0f + expf(-x));
  else if constexpr (A == Act::SiLU) return x / (1.0f + expf(-x));
  else return x;
}

// Gradient through the activation: ReLU, Tanh and Sigmoid read the output y,
// GELU and SiLU the input x.
template <Act A>
__device__ __forceinline__ float act_backward(float x_or_y, float dy) {
  if constexpr (A == Act::ReLU) return x_or_y > 0.0f ? dy : 0.0f;
  else if constexpr (A == Act::Tanh) return dy * (1.0f - x_or_y * x_or_y);
  else if constexpr (A == Act::GELU) {
    const float x = x_or_y;
    const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
    const float pdf = expf(-0.5f * x * x) * kInvSqrt2Pi;
    return dy * (cdf + x * pdf);
  } else if constexpr (A == Act::Sigmoid) {
    return dy * (x_or_y * (1.0f - x_or_y));
  } else if constexpr (A == Act::SiLU) {
    const float s = 1.0f / (1.0f + expf(-x_or_y));
    return dy * (s * (1.0f + x_or_y * (1.0f - s)));
  } else return dy;
}

// ---- elementwise loops (device) ------------------------------------------------

// A grid-stride loop over n elements, kUnroll a thread at a time (the grid's
// threads apart), every one of them loaded (load(i) -> T) before any is
// stored (store(i, T)): with one 2-byte load in flight a thread the memory
// is mostly idle, and a store between two loads keeps the compiler from
// hoisting the second (the output may alias an input). Each element's
// result is what the plain loop gives: nothing is summed across elements.
template <class T, class Load, class Store>
__device__ __forceinline__ void for_each_unrolled(int64_t n, Load load, Store store) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += kUnroll * step) {
    T v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j)
      if (i + j * step < n) v[j] = load(i + j * step);
#pragma unroll
    for (int j = 0; j < kUnroll; ++j)
      if (i + j * step < n) store(i + j * step, v[j]);
  }
}

// ---- reductions (device) --------------------------------------------------------

// Butterfly reductions: every lane ends with the same bits, because each step adds
// the same two values (a + b == b + a in IEEE arithmetic).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the whole block, returned to every thread. blockDim.x is a multiple of
// 32 (at most 1024); `shared` holds 32 values and may be reused right after.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // a previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? shared[lane] : T{0});
}

// dst = v or dst += v: the one place the `accumulate` rule is applied. The
// add is __fadd_rn, which nvcc never fuses with a product in v: dst + a·b as
// one FMA would differ from the CPU's dst + (a·b) (-ffp-contract=off there)
// in the last bit.
__device__ __forceinline__ void store_grad(float* dst, float v, bool accumulate) {
  *dst = accumulate ? __fadd_rn(*dst, v) : v;
}

}  // namespace remat::cuda::detail
