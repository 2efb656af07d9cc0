// Linear and Dense (linear + activation): the GEMMs go to cuBLAS, the bias add,
// the activation epilogue and the bias-gradient reduction are our own kernels.
//
// cuBLAS is column-major. A row-major (r, c) matrix is the column-major (c, r)
// matrix with leading dimension c, i.e. its transpose; so each row-major product
// below is computed as its transpose:
//   y = x·Wᵀ    →  yᵀ (out, rows) = W(as (in,out))ᵀ · xᵀ(as (in,rows))   T, N
//   dx = dy·W   →  dxᵀ (in, rows) = W(as (in,out)) · dyᵀ(as (out,rows))   N, N
//   dW += dyᵀ·x →  dWᵀ (in, out)  = xᵀ(as (in,rows)) · dy(as (out,rows))ᵀ  N, T
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

// ---- kernels ------------------------------------------------------------------

// y (rows, out) = act(y + b): the epilogue after the GEMM wrote x·Wᵀ into y.
template <Act A>
__global__ void bias_act_kernel(float* y, const float* b, int64_t rows, int64_t out) {
  const int64_t n = rows * out;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = detail::act_forward<A>(b ? y[i] + b[i % out] : y[i]);
}

// scratch (rows, out) = gradient of the pre-activation, from y and dy.
template <Act A>
__global__ void act_grad_kernel(const float* y, const float* dy, float* scratch, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    scratch[i] = detail::act_backward<A>(y[i], dy[i]);
}

// db (out) += Σ_rows dy (rows, out). Block (32, kRowLanes): threadIdx.x picks a
// column (coalesced), threadIdx.y a fixed stride of rows; the kRowLanes partial sums
// are then added in index order, so the result depends only on the shapes.
constexpr int kRowLanes = 8;
__global__ void column_sum_kernel(const float* dy, float* db, int64_t rows, int64_t out) {
  __shared__ float partial[kRowLanes][33];
  const int64_t col = blockIdx.x * int64_t{32} + threadIdx.x;
  float sum = 0.0f;
  if (col < out)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) sum += dy[r * out + col];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < out) {
    float total = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) total += partial[k][threadIdx.x];
    db[col] += total;
  }
}

// ---- launchers ----------------------------------------------------------------

void bias_act(Act act, const char* fn, const float* b, float* y, int64_t rows, int64_t out, cudaStream_t stream) {
  detail::dispatch_act(fn, act, [&](auto tag) {
    bias_act_kernel<decltype(tag)::value>
        <<<detail::grid_for(rows * out), kBlock, 0, stream>>>(y, b, rows, out);
  });
  CUDA_CHECK_THROW(cudaGetLastError());
}

void bias_grad(const float* dy, float* db, int64_t rows, int64_t out, cudaStream_t stream) {
  if (!db || rows == 0 || out == 0) return;  // db null: a Linear without bias
  const dim3 block(32, kRowLanes);
  const dim3 grid(static_cast<unsigned>((out + 31) / 32));
  column_sum_kernel<<<grid, block, 0, stream>>>(dy, db, rows, out);
  CUDA_CHECK_THROW(cudaGetLastError());
}

// y = act(x·Wᵀ + b) for any activation; dense_fwd rejects GELU before calling.
void linear_act_fwd(Act act, const char* fn, const float* x, const float* W, const float* b,
                    float* y, int64_t rows, int64_t in, int64_t out, cublasHandle_t cublas,
                    cudaStream_t stream) {
  detail::check_sizes(fn, {rows, in, out});
  detail::dispatch_act(fn, act, [](auto) {});  // an unknown act throws before the GEMM
  if (rows == 0 || out == 0) return;
  if (in == 0) {
    // An empty product is zero (and cuBLAS rejects a leading dimension of 0).
    CUDA_CHECK_THROW(cudaMemsetAsync(y, 0, sizeof(float) * rows * out, stream));
  } else {
    detail::bind_cublas(cublas, stream);
    const float one = 1.0f;
    const float zero = 0.0f;
    // yᵀ (out, rows) = (W as (in, out))ᵀ · (x as (in, rows)).
    CUBLAS_CHECK_THROW(cublasSgemm_64(cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one,
                                      W, in, x, in, &zero, y, out));
  }
  bias_act(act, fn, b, y, rows, out, stream);
}

}  // namespace

void linear_fwd(const float* x, const float* W, const float* b, float* y, int64_t rows,
                int64_t in, int64_t out, cublasHandle_t cublas, cudaStream_t stream) {
  linear_act_fwd(Act::None, "linear_fwd", x, W, b, y, rows, in, out, cublas, stream);
}

void linear_bwd(const float* x, const float* W, const float* dy, float* dx, float* dW,
                float* db, int64_t rows, int64_t in, int64_t out, bool accumulate,
                cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("linear_bwd", {rows, in, out});
  const float one = 1.0f;
  if (rows > 0 && in > 0) {
    if (out > 0) {
      detail::bind_cublas(cublas, stream);
      const float dx_beta = accumulate ? 1.0f : 0.0f;  // beta == 0: dx is never read
      // dxᵀ (in, rows) = (W as (in, out)) · (dy as (out, rows)).
      CUBLAS_CHECK_THROW(cublasSgemm_64(cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, &one,
                                        W, in, dy, out, &dx_beta, dx, in));
      // dWᵀ (in, out) += (x as (in, rows)) · (dy as (out, rows))ᵀ.
      CUBLAS_CHECK_THROW(cublasSgemm_64(cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, &one,
                                        x, in, dy, out, &one, dW, in));
    } else if (!accumulate) {
      // No outputs, so dx = dy·W is zero, and cuBLAS rejects a leading dimension of 0.
      CUDA_CHECK_THROW(cudaMemsetAsync(dx, 0, sizeof(float) * rows * in, stream));
    }
  }
  bias_grad(dy, db, rows, out, stream);
}

// The same products on 16-bit operands (gemm_lowp, row-major): y = x·Wᵀ,
// dx = dy·W, dW += dyᵀ·x; the epilogue and the bias gradient are the f32 path's.
void linear_fwd_lowp(HalfType t, Act act, const uint16_t* x, const uint16_t* W, const float* b, float* y,
                     int64_t rows, int64_t in, int64_t out, cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("linear_fwd_lowp", {rows, in, out});
  if (act == Act::GELU || act == Act::SiLU)
    throw std::invalid_argument("linear_fwd_lowp: GELU and SiLU are not fused (use linear + act)");
  detail::dispatch_act("linear_fwd_lowp", act, [](auto) {});  // an unknown act throws before the GEMM
  if (rows == 0 || out == 0) return;
  gemm_lowp(t, x, W, y, 1, rows, out, in, false, true, 0.0f, cublas, stream);
  bias_act(act, "linear_fwd_lowp", b, y, rows, out, stream);
}

void linear_bwd_lowp(HalfType t, const uint16_t* x, const uint16_t* W, const uint16_t* dy, const float* dy_f32,
                     float* dx, float* dW, float* db, int64_t rows, int64_t in, int64_t out, bool accumulate,
                     cublasHandle_t cublas, cudaStream_t stream) {
  detail::check_sizes("linear_bwd_lowp", {rows, in, out});
  gemm_lowp(t, dy, W, dx, 1, rows, in, out, false, false, accumulate ? 1.0f : 0.0f, cublas, stream);
  gemm_lowp(t, dy, x, dW, 1, out, in, rows, true, false, 1.0f, cublas, stream);
  bias_grad(dy_f32, db, rows, out, stream);
}

void dense_fwd(Act act, const float* x, const float* W, const float* b, float* y,
               int64_t rows, int64_t in, int64_t out, cublasHandle_t cublas,
               cudaStream_t stream) {
  if (act == Act::GELU || act == Act::SiLU)
    throw std::invalid_argument("dense_fwd: GELU and SiLU are not allowed in dense (their backward needs the "
                                "pre-activation: use linear + act)");
  linear_act_fwd(act, "dense_fwd", x, W, b, y, rows, in, out, cublas, stream);
}

void dense_bwd(Act act, const float* x, const float* y, const float* W, const float* dy,
               float* dx, float* dW, float* db, float* scratch, int64_t rows, int64_t in,
               int64_t out, bool accumulate, cublasHandle_t cublas, cudaStream_t stream) {
  if (act == Act::GELU || act == Act::SiLU)
    throw std::invalid_argument("dense_bwd: GELU and SiLU are not allowed in dense (their backward needs the "
                                "pre-activation: use linear + act)");
  detail::check_sizes("dense_bwd", {rows, in, out});
  const float* dpre = dy;  // Act::None: the pre-activation gradient is dy itself
  if (act != Act::None && rows * out > 0) {
    detail::dispatch_act("dense_bwd", act, [&](auto tag) {
      act_grad_kernel<decltype(tag)::value>
          <<<detail::grid_for(rows * out), kBlock, 0, stream>>>(y, dy, scratch, rows * out);
    });
    CUDA_CHECK_THROW(cudaGetLastError());
    dpre = scratch;
  }
  linear_bwd(x, W, dpre, dx, dW, db, rows, in, out, accumulate, cublas, stream);
}

}  // namespace remat::cuda
