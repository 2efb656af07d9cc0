// The 16-bit variants of the memory-bound kernels of mixed precision
// (docs/gpu.md#16-bit-loads-and-stores): each reads its operands in their
// stored dtype (f32, or bf16/f16 codes widened exactly), computes in f32 with
// the very expressions of its f32 kernel (the shared device functions, or
// the same lines: activations.cu, attention.cu, constants.cu,
// elementwise.cu), the softmax under the same launch shape (its sums' trees),
// the element-wise ones kUnroll elements a thread (each element's value does
// not depend on the thread), so the value before rounding
// is the f32 kernel's bit for bit, and stores it as the widening call does
// (core/exec/mixed_call.h): rounded once to the destination's dtype (nearest
// even, as convert.cu's narrowing), or for a gradient that adds, the f32 sum
// of the stored value and the rounded result, rounded once (add_stored).
// Results are therefore the widen -> f32 kernel -> narrow path's bits, which
// tests/gpu/test_gpu_pointwise_io.cpp checks, NaN, infinities, ties and f16
// subnormals included.
#include <cmath>
#include <string>

#include "core/kernels/rng.h"
#include "gpu/kernels/lowp_io.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

using detail::din;
using detail::DIn;
using detail::dout;
using detail::DOut;
__device__ __forceinline__ float load(DIn a, int64_t i) { return detail::ld(a, i); }
__device__ __forceinline__ void store(DOut o, int64_t i, float v) { detail::st(o, i, v, false); }

// The elementwise kernels load kUnroll elements a thread before storing any
// (detail::for_each_unrolled): each element's value is its f32 kernel's.
using detail::for_each_unrolled;
struct Two {
  float a, b;
};

// activations.cu's act_fwd_kernel / act_bwd_kernel.
template <Act A>
__global__ void act_fwd_io_kernel(DIn x, DOut y, int64_t n) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(x, i); },
      [&](int64_t i, float v) { store(y, i, detail::act_forward<A>(v)); });
}
template <Act A>
__global__ void act_bwd_io_kernel(DIn x_or_y, DIn dy, DOut dx, int64_t n) {
  for_each_unrolled<Two>(
      n, [&](int64_t i) { return Two{A == Act::None ? 0.0f : load(x_or_y, i), load(dy, i)}; },
      [&](int64_t i, Two v) { store(dx, i, detail::act_backward<A>(v.a, v.b)); });
}

// constants.cu's const_fwd_kernel / const_bwd_kernel.
__global__ void const_fwd_io_kernel(int op, DIn xin, const float* c, DOut y, int64_t n, int64_t cn) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(xin, i); },
      [&](int64_t i, float x) {
        const float k = c[i % cn];
        store(y, i, op == 0 ? x * k : op == 1 ? x / k : x + k);
      });
}
__global__ void const_bwd_io_kernel(int op, DIn dyin, const float* c, DOut dx, int64_t n, int64_t cn) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(dyin, i); },
      [&](int64_t i, float dy) {
        const float k = c[i % cn];
        store(dx, i, op == 0 ? dy * k : op == 1 ? dy / k : dy);
      });
}

// attention.cu's masked_fill kernels.
__global__ void masked_fill_fwd_io_kernel(DIn x, const uint8_t* mask, DOut y, int64_t n, int64_t mask_n, float value) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(x, i); },
      [&](int64_t i, float v) { store(y, i, mask[i % mask_n] ? value : v); });
}
__global__ void masked_fill_bwd_io_kernel(DIn dy, const uint8_t* mask, DOut dx, int64_t n, int64_t mask_n) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(dy, i); },
      [&](int64_t i, float g) { store(dx, i, mask[i % mask_n] ? 0.0f : g); });
}

// elementwise.cu's dropout_kernel (forward and backward alike), add_kernel,
// and the copy that add_into (Add's backward, dropout with p = 0) makes.
__global__ void dropout_io_kernel(DIn in, DOut out, int64_t n, float p, float scale, uint64_t seed, uint32_t op_id) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(in, i); },
      [&](int64_t i, float x) {
        store(out, i, rng_keep(seed, op_id, static_cast<uint64_t>(i), p) ? x * scale : 0.0f);
      });
}
__global__ void add_io_kernel(DIn a, DIn b, DOut y, int64_t n) {
  for_each_unrolled<Two>(
      n, [&](int64_t i) { return Two{load(a, i), load(b, i)}; }, [&](int64_t i, Two v) { store(y, i, v.a + v.b); });
}
__global__ void copy_io_kernel(DIn src, DOut dst, int64_t n) {
  for_each_unrolled<float>(
      n, [&](int64_t i) { return load(src, i); }, [&](int64_t i, float v) { store(dst, i, v); });
}

// attention.cu's softmax kernels, line for line, with the same block (256
// threads a row) and grid: the same reduction trees.
constexpr int kSoftmaxBlock = 256;
unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < detail::kMaxBlocks ? rows : detail::kMaxBlocks);
}
__global__ void softmax_fwd_io_kernel(DIn x, DOut y, int64_t rows, int64_t cols) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, load(x, base + c));
    m = detail::warp_max(m);
    __syncthreads();
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = m;
    __syncthreads();
    m = detail::warp_max(threadIdx.x % 32 < blockDim.x / 32 ? shared[threadIdx.x % 32] : -INFINITY);
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(load(x, base + c) - m);
    sum = detail::block_sum(sum, shared);
    const float inv = 1.0f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) store(y, base + c, expf(load(x, base + c) - m) * inv);
  }
}
__global__ void softmax_bwd_io_kernel(DIn y, DIn dy, DOut dx, int64_t rows, int64_t cols) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += load(dy, base + c) * load(y, base + c);
    dot = detail::block_sum(dot, shared);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      store(dx, base + c, load(y, base + c) * (load(dy, base + c) - dot));
  }
}


void check_repeat(const char* fn, int64_t n, int64_t cn) {
  detail::check_sizes(fn, {n, cn});
  if (cn <= 0 || n % cn != 0)
    throw std::invalid_argument(std::string(fn) + ": the constant's " + std::to_string(cn) +
                                " values do not repeat over " + std::to_string(n) + " elements");
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------

void act_fwd_io(Act act, IoIn x, IoOut y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("act_fwd_io", {n});
  detail::dispatch_act("act_fwd_io", act, [&](auto tag) {
    if (n == 0) return;
    act_fwd_io_kernel<decltype(tag)::value><<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(x), dout(y), n);
    CUDA_CHECK_THROW(cudaGetLastError());
  });
}

void act_bwd_io(Act act, IoIn x_or_y, IoIn dy, IoOut dx, int64_t n, cudaStream_t stream) {
  detail::check_sizes("act_bwd_io", {n});
  detail::dispatch_act("act_bwd_io", act, [&](auto tag) {
    if (n == 0) return;
    act_bwd_io_kernel<decltype(tag)::value>
        <<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(x_or_y), din(dy), dout(dx), n);
    CUDA_CHECK_THROW(cudaGetLastError());
  });
}

void const_fwd_io(ConstOp op, IoIn x, const float* c, IoOut y, int64_t n, int64_t cn, cudaStream_t stream) {
  check_repeat("const_fwd_io", n, cn);
  if (n == 0) return;
  const_fwd_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(static_cast<int>(op), din(x), c, dout(y), n, cn);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void const_bwd_io(ConstOp op, IoIn dy, const float* c, IoOut dx, int64_t n, int64_t cn, cudaStream_t stream) {
  check_repeat("const_bwd_io", n, cn);
  if (n == 0) return;
  const_bwd_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(static_cast<int>(op), din(dy), c, dout(dx), n, cn);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void masked_fill_fwd_io(IoIn x, const uint8_t* mask, IoOut y, int64_t n, int64_t mask_n, float value,
                        cudaStream_t stream) {
  detail::check_sizes("masked_fill_fwd_io", {n, mask_n});
  if (n == 0) return;
  if (mask_n == 0 || n % mask_n != 0)
    throw std::invalid_argument("masked_fill_fwd_io: the mask (" + std::to_string(mask_n) +
                                " elements) does not repeat over " + std::to_string(n));
  masked_fill_fwd_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(x), mask, dout(y), n, mask_n, value);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void masked_fill_bwd_io(IoIn dy, const uint8_t* mask, IoOut dx, int64_t n, int64_t mask_n, cudaStream_t stream) {
  detail::check_sizes("masked_fill_bwd_io", {n, mask_n});
  if (n == 0) return;
  if (mask_n == 0 || n % mask_n != 0)
    throw std::invalid_argument("masked_fill_bwd_io: the mask (" + std::to_string(mask_n) +
                                " elements) does not repeat over " + std::to_string(n));
  masked_fill_bwd_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(dy), mask, dout(dx), n, mask_n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void dropout_io(IoIn in, IoOut out, int64_t n, float p, uint64_t seed, uint32_t op_id, cudaStream_t stream) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw std::invalid_argument("dropout_io: p must be in [0, 1], got " + std::to_string(p));
  detail::check_sizes("dropout_io", {n});
  if (p == 0.0f) return copy_io(in, out, n, stream);  // identity, as dropout's shortcut (a copy)
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - p);  // elementwise.cu's expression
  dropout_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(in), dout(out), n, p, scale, seed, op_id);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void add_fwd_io(IoIn a, IoIn b, IoOut y, int64_t n, cudaStream_t stream) {
  detail::check_sizes("add_fwd_io", {n});
  if (n == 0) return;
  add_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(a), din(b), dout(y), n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void copy_io(IoIn src, IoOut dst, int64_t n, cudaStream_t stream) {
  detail::check_sizes("copy_io", {n});
  if (n == 0) return;
  copy_io_kernel<<<detail::grid_unrolled(n), kBlock, 0, stream>>>(din(src), dout(dst), n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void softmax_fwd_io(IoIn x, IoOut y, int64_t rows, int64_t cols, cudaStream_t stream) {
  detail::check_sizes("softmax_fwd_io", {rows, cols});
  if (rows == 0 || cols == 0) return;
  softmax_fwd_io_kernel<<<row_grid(rows), kSoftmaxBlock, 0, stream>>>(din(x), dout(y), rows, cols);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void softmax_bwd_io(IoIn y, IoIn dy, IoOut dx, int64_t rows, int64_t cols, cudaStream_t stream) {
  detail::check_sizes("softmax_bwd_io", {rows, cols});
  if (rows == 0 || cols == 0) return;
  softmax_bwd_io_kernel<<<row_grid(rows), kSoftmaxBlock, 0, stream>>>(din(y), din(dy), dout(dx), rows, cols);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
