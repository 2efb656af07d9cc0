// NCHW convolution, forward and backward, two ways:
// - cuDNN (REMAT_HAVE_CUDNN, ConvContext::cudnn set): its deterministic
//   algorithms only (the backward's ALGO_0/ALGO_3 use atomics), FMA math (no
//   TF32, as cuBLAS here), the fastest such algorithm per geometry, chosen once
//   and kept in the engine (cudnn_create) with its descriptors;
// - otherwise im2col + cuBLAS GEMMs one image at a time (col2im gathers, so
//   nothing is summed by atomics), the CPU's method.
// The bias is our own kernel either way (its gradient a fixed-order sum).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "gpu/kernels/device_common.cuh"

#ifdef REMAT_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace remat::cuda {
namespace {

using detail::kBlock;

void check(const char* fn, const ConvGeom& g) {
  try {
    remat::cpu::check_conv(g);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(fn) + ": " + e.what());
  }
}

// ---- kernels ------------------------------------------------------------------

struct Geom {  // ConvGeom with its output size, for the device
  int64_t c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, oh, ow;
};

Geom device_geom(const ConvGeom& g) {
  return {g.c, g.h, g.w, g.k, g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.oh(), g.ow()};
}

// cols (c·r·s, oh·ow) of one image x (c, h, w); zero where the window is in the padding.
__global__ void im2col_kernel(Geom g, const float* x, float* cols) {
  const int64_t ohw = g.oh * g.ow, total = g.c * g.r * g.s * ohw;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / ohw, o = i % ohw;
    const int64_t ch = row / (g.r * g.s), ky = (row / g.s) % g.r, kx = row % g.s;
    const int64_t iy = (o / g.ow) * g.sh - g.ph + ky * g.dh, ix = (o % g.ow) * g.sw - g.pw + kx * g.dw;
    cols[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[(ch * g.h + iy) * g.w + ix] : 0.0f;
  }
}

// dx (c, h, w) of one image = or += the column gradients gathered back: each
// input element sums the (ky, kx, output) entries that read it, in row order.
__global__ void col2im_kernel(Geom g, const float* cols, float* dx, bool accumulate) {
  const int64_t ohw = g.oh * g.ow, total = g.c * g.h * g.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ch = i / (g.h * g.w), iy = (i / g.w) % g.h, ix = i % g.w;
    float sum = 0.0f;
    for (int64_t ky = 0; ky < g.r; ++ky) {
      const int64_t ty = iy + g.ph - ky * g.dh;  // = oy·sh
      if (ty < 0 || ty % g.sh) continue;
      const int64_t oy = ty / g.sh;
      if (oy >= g.oh) continue;
      for (int64_t kx = 0; kx < g.s; ++kx) {
        const int64_t tx = ix + g.pw - kx * g.dw;
        if (tx < 0 || tx % g.sw) continue;
        const int64_t ox = tx / g.sw;
        if (ox >= g.ow) continue;
        sum += cols[((ch * g.r + ky) * g.s + kx) * ohw + oy * g.ow + ox];
      }
    }
    detail::store_grad(&dx[i], sum, accumulate);
  }
}

// y (n, k, ohw) += b (k).
__global__ void add_bias_kernel(float* y, const float* b, int64_t n, int64_t k, int64_t ohw) {
  const int64_t total = n * k * ohw;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] += b[(i / ohw) % k];
}

// db (k) += Σ over (n, ohw) of dy: one block per channel.
__global__ void bias_grad_kernel(const float* dy, float* db, int64_t n, int64_t k, int64_t ohw) {
  __shared__ float shared[32];
  for (int64_t ch = blockIdx.x; ch < k; ch += gridDim.x) {
    float sum = 0.0f;
    for (int64_t e = threadIdx.x; e < n * ohw; e += blockDim.x) sum += dy[((e / ohw) * k + ch) * ohw + e % ohw];
    sum = detail::block_sum(sum, shared);
    if (threadIdx.x == 0) db[ch] += sum;
  }
}

void add_bias(const ConvGeom& g, float* y, const float* b, cudaStream_t stream) {
  const int64_t total = g.n * g.k * g.oh() * g.ow();
  add_bias_kernel<<<detail::grid_for(total), kBlock, 0, stream>>>(y, b, g.n, g.k, g.oh() * g.ow());
  CUDA_CHECK_THROW(cudaGetLastError());
}

void bias_grad(const ConvGeom& g, const float* dy, float* db, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(g.k < detail::kMaxBlocks ? g.k : detail::kMaxBlocks);
  bias_grad_kernel<<<grid, kBlock, 0, stream>>>(dy, db, g.n, g.k, g.oh() * g.ow());
  CUDA_CHECK_THROW(cudaGetLastError());
}

// ---- im2col + cuBLAS ------------------------------------------------------------

size_t im2col_workspace(const ConvGeom& g) { return sizeof(float) * g.c * g.r * g.s * g.oh() * g.ow(); }

void need_workspace(const char* fn, const ConvContext& ctx, size_t bytes) {
  if (ctx.workspace_bytes < bytes || (bytes && !ctx.workspace))
    throw std::invalid_argument(std::string(fn) + ": a workspace of " + std::to_string(bytes) +
                                " bytes is needed, " + std::to_string(ctx.workspace_bytes) + " given");
}

// Per image and group, row-major: y_g (k/G, ohw) = W_g (k/G, K) · cols_g (K, ohw),
// K = c/G·r·s; the G groups are one strided-batched GEMM.
void im2col_fwd(const ConvGeom& g, const float* x, const float* W, float* y, const ConvContext& ctx) {
  const Geom d = device_geom(g);
  const int64_t ohw = d.oh * d.ow, kg = g.k / g.groups, K = g.c / g.groups * g.r * g.s;
  auto* cols = static_cast<float*>(ctx.workspace);
  for (int64_t i = 0; i < g.n; ++i) {
    im2col_kernel<<<detail::grid_for(g.c * g.r * g.s * ohw), kBlock, 0, ctx.stream>>>(d, x + i * g.c * g.h * g.w,
                                                                                       cols);
    CUDA_CHECK_THROW(cudaGetLastError());
    detail::gemm_rm(W, cols, y + i * g.k * ohw, g.groups, kg, ohw, K, false, false, 0.0f, ctx.cublas, ctx.stream,
                    kg * K, K * ohw, kg * ohw);
  }
}

void im2col_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx, float* dW,
                bool accumulate, const ConvContext& ctx) {
  const Geom d = device_geom(g);
  const int64_t ohw = d.oh * d.ow, kg = g.k / g.groups, K = g.c / g.groups * g.r * g.s;
  auto* cols = static_cast<float*>(ctx.workspace);
  for (int64_t i = 0; i < g.n; ++i) {  // images in order: dW's sum has one order
    const float* dyi = dy + i * g.k * ohw;
    if (dW) {
      im2col_kernel<<<detail::grid_for(g.c * g.r * g.s * ohw), kBlock, 0, ctx.stream>>>(d, x + i * g.c * g.h * g.w,
                                                                                         cols);
      CUDA_CHECK_THROW(cudaGetLastError());
      // dW_g (k/G, K) += dy_g (k/G, ohw) · cols_gᵀ.
      detail::gemm_rm(dyi, cols, dW, g.groups, kg, K, ohw, false, true, 1.0f, ctx.cublas, ctx.stream, kg * ohw,
                      K * ohw, kg * K);
    }
    if (!dx) continue;
    // cols_g (K, ohw) = W_gᵀ · dy_g, then gathered into dx.
    detail::gemm_rm(W, dyi, cols, g.groups, K, ohw, kg, true, false, 0.0f, ctx.cublas, ctx.stream, kg * K,
                    kg * ohw, K * ohw);
    col2im_kernel<<<detail::grid_for(g.c * g.h * g.w), kBlock, 0, ctx.stream>>>(d, cols, dx + i * g.c * g.h * g.w,
                                                                                accumulate);
    CUDA_CHECK_THROW(cudaGetLastError());
  }
}

// ---- cuDNN ------------------------------------------------------------------------

#ifdef REMAT_HAVE_CUDNN

void cudnn_check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  // Out of memory maps to the out-of-memory result; the rest is a CUDA failure.
  const bool oom = s == CUDNN_STATUS_ALLOC_FAILED;
  throw CudaError(std::string(what) + " failed: " + cudnnGetErrorString(s),
                  oom ? cudaErrorMemoryAllocation : cudaErrorUnknown, CUBLAS_STATUS_SUCCESS);
}
#define CUDNN_CHECK(expr) cudnn_check((expr), #expr)

// Descriptors and the chosen deterministic algorithms of one geometry.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t>;
Key key_of(const ConvGeom& g) {
  return {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
}

}  // namespace

// What ConvContext::cudnn points to: the handle and the plans made with it.
struct CudnnEngine {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Plan>> plans;
};

namespace {

int as_int(int64_t v, const char* what) {
  if (v > INT32_MAX) throw std::invalid_argument(std::string("conv2d: ") + what + " is too large for cuDNN");
  return static_cast<int>(v);
}

// The first (fastest) deterministic result of a cuDNN algorithm query that
// uses no tensor cores. The calls run with the descriptor's math type,
// CUDNN_FMA_MATH, whatever a result reports; a result may report
// CUDNN_DEFAULT_MATH for an FP32 algorithm, and accepting FMA alone could then
// leave every convolution on im2col (conv2d_uses_cudnn and the GPU tests say
// which path ran).
template <typename Perf>
bool pick(const Perf* perf, int count, decltype(Perf{}.algo)& algo, size_t& bytes) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        (perf[i].mathType == CUDNN_FMA_MATH || perf[i].mathType == CUDNN_DEFAULT_MATH)) {
      algo = perf[i].algo;
      bytes = perf[i].memory;
      return true;
    }
  }
  return false;
}

// The plan of g, made on first use; nullptr when cuDNN has no deterministic
// FMA algorithm for it (then im2col is used).
const Plan* plan_for(CudnnEngine& e, const ConvGeom& g) {
  std::lock_guard<std::mutex> lock(e.mutex);
  auto& slot = e.plans[key_of(g)];
  if (slot) return slot.get();
  auto p = std::make_unique<Plan>();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(g.n, "n"),
                                         as_int(g.c, "c"), as_int(g.h, "h"), as_int(g.w, "w")));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(g.n, "n"),
                                         as_int(g.k, "k"), as_int(g.oh(), "oh"), as_int(g.ow(), "ow")));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, as_int(g.k, "k"),
                                         as_int(g.c / g.groups, "c/groups"), as_int(g.r, "r"), as_int(g.s, "s")));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, as_int(g.pad_h, "pad_h"), as_int(g.pad_w, "pad_w"),
                                              as_int(g.stride_h, "stride_h"), as_int(g.stride_w, "stride_w"),
                                              as_int(g.dil_h, "dil_h"), as_int(g.dil_w, "dil_w"),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, as_int(g.groups, "groups")));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH));
  constexpr int kAsk = 16;
  int got = 0;
  size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kAsk];
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(e.handle, p->x, p->w, p->conv, p->y, kAsk, &got, fwd));
  const bool ok_fwd = pick(fwd, got, p->fwd, fwd_bytes);
  cudnnConvolutionBwdDataAlgoPerf_t data[kAsk];
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(e.handle, p->w, p->y, p->conv, p->x, kAsk, &got, data));
  const bool ok_data = pick(data, got, p->bwd_data, data_bytes);
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kAsk];
  CUDNN_CHECK(
      cudnnGetConvolutionBackwardFilterAlgorithm_v7(e.handle, p->x, p->y, p->conv, p->w, kAsk, &got, filter));
  const bool ok_filter = pick(filter, got, p->bwd_filter, filter_bytes);
  if (!ok_fwd || !ok_data || !ok_filter) return nullptr;  // slot stays empty: asked again, cheaply refused
  p->workspace = std::max({fwd_bytes, data_bytes, filter_bytes});
  slot = std::move(p);
  return slot.get();
}

const Plan* cudnn_plan(const ConvContext& ctx, const ConvGeom& g) {
  if (!ctx.cudnn) return nullptr;
  return plan_for(*static_cast<CudnnEngine*>(ctx.cudnn), g);
}

#endif  // REMAT_HAVE_CUDNN

}  // namespace

// ---- launchers ----------------------------------------------------------------

bool cudnn_available() {
#ifdef REMAT_HAVE_CUDNN
  return true;
#else
  return false;
#endif
}

void* cudnn_create(cudaStream_t stream) {
#ifdef REMAT_HAVE_CUDNN
  auto e = std::make_unique<CudnnEngine>();
  CUDNN_CHECK(cudnnCreate(&e->handle));
  const cudnnStatus_t s = cudnnSetStream(e->handle, stream);
  if (s != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(e->handle);
    CUDNN_CHECK(s);
  }
  return e.release();
#else
  (void)stream;
  throw CudaError("cudnn_create: this build has no cuDNN (REMAT_CUDNN)", cudaErrorNotSupported,
                  CUBLAS_STATUS_SUCCESS);
#endif
}

void cudnn_destroy(void* handle) noexcept {
#ifdef REMAT_HAVE_CUDNN
  auto* e = static_cast<CudnnEngine*>(handle);
  if (!e) return;
  e->plans.clear();
  cudnnDestroy(e->handle);
  delete e;
#else
  (void)handle;
#endif
}

size_t conv2d_workspace_bytes(const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_workspace_bytes", g);
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan(ctx, g)) return p->workspace;
#endif
  (void)ctx;
  return im2col_workspace(g);
}

bool conv2d_uses_cudnn(const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_uses_cudnn", g);
#ifdef REMAT_HAVE_CUDNN
  return cudnn_plan(ctx, g) != nullptr;
#else
  (void)ctx;
  return false;
#endif
}

void conv2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y,
                const ConvContext& ctx) {
  check("conv2d_fwd", g);
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan(ctx, g)) {
    need_workspace("conv2d_fwd", ctx, p->workspace);
    const float one = 1.0f, zero = 0.0f;
    auto* e = static_cast<CudnnEngine*>(ctx.cudnn);
    CUDNN_CHECK(cudnnConvolutionForward(e->handle, &one, p->x, x, p->w, W, p->conv, p->fwd, ctx.workspace,
                                        ctx.workspace_bytes, &zero, p->y, y));
    if (b) add_bias(g, y, b, ctx.stream);
    return;
  }
#endif
  need_workspace("conv2d_fwd", ctx, im2col_workspace(g));
  im2col_fwd(g, x, W, y, ctx);
  if (b) add_bias(g, y, b, ctx.stream);
}

void conv2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx, float* dW,
                float* db, bool accumulate, const ConvContext& ctx) {
  check("conv2d_bwd", g);
  if (db) bias_grad(g, dy, db, ctx.stream);
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan(ctx, g)) {
    need_workspace("conv2d_bwd", ctx, p->workspace);
    const float one = 1.0f, dx_beta = accumulate ? 1.0f : 0.0f;
    auto* e = static_cast<CudnnEngine*>(ctx.cudnn);
    if (dW)
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(e->handle, &one, p->x, x, p->y, dy, p->conv, p->bwd_filter,
                                                 ctx.workspace, ctx.workspace_bytes, &one, p->w, dW));
    if (dx)
      CUDNN_CHECK(cudnnConvolutionBackwardData(e->handle, &one, p->w, W, p->y, dy, p->conv, p->bwd_data,
                                               ctx.workspace, ctx.workspace_bytes, &dx_beta, p->x, dx));
    return;
  }
#endif
  need_workspace("conv2d_bwd", ctx, im2col_workspace(g));
  im2col_bwd(g, x, W, dy, dx, dW, accumulate, ctx);
}

namespace {

// The bias of a transposed convolution is per channel of g's input: a 1x1
// geometry over that shape adds it and sums its gradient.
ConvGeom channel_geom(const ConvGeom& g) {
  ConvGeom b;
  b.n = g.n;
  b.c = b.k = g.c;
  b.h = g.h;
  b.w = g.w;
  return b;
}

}  // namespace

void conv_transpose2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y,
                          const ConvContext& ctx) {
  conv2d_bwd(g, nullptr, W, x, y, nullptr, nullptr, false, ctx);
  if (b) add_bias(channel_geom(g), y, b, ctx.stream);
}

void conv_transpose2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx,
                          float* dx_scratch, float* dW, float* db, bool accumulate, const ConvContext& ctx) {
  if (db) bias_grad(channel_geom(g), dy, db, ctx.stream);
  conv2d_bwd(g, dy, W, x, nullptr, dW, nullptr, false, ctx);
  if (!dx) return;
  float* out = accumulate ? dx_scratch : dx;
  conv2d_fwd(g, dy, W, nullptr, out, ctx);
  if (accumulate) add_into(out, dx, g.n * g.k * g.oh() * g.ow(), true, ctx.stream);
}

}  // namespace remat::cuda
