// NCHW convolution, forward and backward, two ways:
// - cuDNN (REMAT_HAVE_CUDNN, ConvContext::cudnn set): its deterministic
//   algorithms only (the backward's ALGO_0/ALGO_3 use atomics), FMA math (no
//   TF32, as cuBLAS here), the fastest such algorithm per geometry, chosen once
//   and kept in the engine (cudnn_create) with its descriptors; the backward's
//   fastest whatever their determinism where the context allows it (below);
// - otherwise im2col + cuBLAS GEMMs one image at a time (col2im gathers, so
//   nothing is summed by atomics), the CPU's method.
// The bias is our own kernel either way (its gradient a fixed-order sum).
//
// Mixed precision's convolutions (conv2d_*_lowp; docs/gpu.md#mixed-precision-on-tensor-cores)
// run on cuDNN only: bf16/f16 tensors and filters, f32 compute (the
// convolution descriptor's CUDNN_DATA_FLOAT, cuDNN's PSEUDO_BFLOAT16/
// PSEUDO_HALF configurations), CUDNN_TENSOR_OP_MATH, deterministic algorithms
// only. cuDNN's legacy API takes one data type for x, w and y, so it writes
// its results in the 16-bit type; the launchers widen them into the f32
// buffers the caller goes on with (the bias is added to, and its gradient
// summed over, f32 values, as on the f32 path).
//
// Determinism (cuDNN's API reference, cudnnConvolutionBwdDataAlgo_t and
// cudnnConvolutionBwdFilterAlgo_t, and the developer guide's
// "Reproducibility (Determinism)"): every forward algorithm is deterministic;
// backward-data ALGO_0 and backward-filter ALGO_0 and ALGO_3 sum with
// atomics and are not; the others (backward-data ALGO_1, FFT, FFT_TILING,
// WINOGRAD, WINOGRAD_NONFUSED; backward-filter ALGO_1, FFT, FFT_TILING,
// WINOGRAD_NONFUSED) give the same bits from run to run on one GPU. The
// query results carry that as perf.determinism; the 16-bit plans take, of
// the deterministic ones, only those that sum directly (pick_lowp), so that
// their choice is deterministic by name too.
// The algorithm is chosen once per geometry and type (the plan below), from
// the descriptors alone, so the same op gets the same algorithm, hence the
// same bits, under every strategy.
//
// Non-deterministic backward (ConvContext::nondeterministic_backward, remat
// run --nondeterministic-backward; docs/gpu.md): each plan also holds, from
// the same query results, the first-ranked backward-data and backward-filter
// algorithms whatever their determinism (conv_algo_choice.h); a backward call
// with the option runs those, one without it the deterministic ones. Both
// choices live in the one plan of a geometry, so a plan made for a run with
// the option serves a run without it unchanged, and the reverse. The forward
// keeps its deterministic algorithm either way, and so does a transposed
// convolution's forward (a backward-data call), so that the forward and every
// recomputation give the same bits with and without the option.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "gpu/kernels/conv_algo_choice.h"
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
  bool lowp = false;  // 16-bit tensors, tensor-op math
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t workspace = 0;  // the largest of the three deterministic algorithms'
  // The backward's first-ranked algorithms whatever their determinism (the
  // deterministic ones where cuDNN ranks those first), for a context that
  // allows it; whether each is non-deterministic, and the workspace of all
  // five (under the option the deterministic ones still run: the forward, a
  // transposed convolution's forward on backward-data).
  cudnnConvolutionBwdDataAlgo_t bwd_data_any{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_any{};
  bool data_any_nondeterministic = false, filter_any_nondeterministic = false;
  size_t workspace_any = 0;
  // What a call under ctx runs.
  size_t workspace_for(bool any) const { return any ? workspace_any : workspace; }
  cudnnConvolutionBwdDataAlgo_t data_algo(bool any) const { return any ? bwd_data_any : bwd_data; }
  cudnnConvolutionBwdFilterAlgo_t filter_algo(bool any) const { return any ? bwd_filter_any : bwd_filter; }
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
// The tensors' type: f32 (FMA math) or one of the 16-bit ones (tensor-op math).
enum class PlanType : int { F32, BF16, F16 };

}  // namespace

// What ConvContext::cudnn points to: the handle and the plans made with it.
struct CudnnEngine {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
  std::map<std::pair<Key, PlanType>, std::unique_ptr<Plan>> plans;
};

namespace {

int as_int(int64_t v, const char* what) {
  if (v > INT32_MAX) throw std::invalid_argument(std::string("conv2d: ") + what + " is too large for cuDNN");
  return static_cast<int>(v);
}

// A query result as conv_algo_choice.h reads it. The f32 plans accept FMA
// math and the default: the calls run with the descriptor's math type,
// CUDNN_FMA_MATH, whatever a result reports; a result may report
// CUDNN_DEFAULT_MATH for an FP32 algorithm, and accepting FMA alone could then
// leave every convolution on im2col (conv2d_uses_cudnn and the GPU tests say
// which path ran).
//
// The 16-bit plans take only algorithms that sum products directly, as a GEMM
// does (forward IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM; backward-data
// ALGO_1; backward-filter ALGO_1; and, where the backward may be
// non-deterministic, the atomic backward-data ALGO_0 and backward-filter
// ALGO_0 and ALGO_3), so that a result errs only by the summation's rounding
// and stays within the bound tests/gpu/test_gpu_conv_lowp.cpp derives (FFT and
// Winograd transform the operands first, with errors of another kind), and
// whose math does not convert (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; the
// operands are 16-bit already). They count as deterministic only where both
// the result's flag and cuDNN's reference say so (the top of this file), so
// that their deterministic choice is deterministic by name too.
bool direct_sum(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
}
bool direct_sum(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool direct_sum(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}
bool atomic_by_name(cudnnConvolutionFwdAlgo_t) { return false; }
bool atomic_by_name(cudnnConvolutionBwdDataAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
bool atomic_by_name(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

template <typename Perf>
AlgoCandidate candidate(const Perf& p, bool lowp) {
  AlgoCandidate c;
  c.succeeded = p.status == CUDNN_STATUS_SUCCESS;
  c.deterministic = p.determinism == CUDNN_DETERMINISTIC && !(lowp && atomic_by_name(p.algo));
  c.math_ok = lowp ? p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                   : p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
  c.direct_sum = direct_sum(p.algo);
  return c;
}

// The algorithm conv_algo_choice.h takes from `count` query results, with its
// workspace and whether it is non-deterministic; false when none qualifies.
template <typename Perf>
bool pick(const Perf* perf, int count, bool lowp, bool allow_nondeterministic, decltype(Perf{}.algo)& algo,
          size_t& bytes, bool* nondeterministic = nullptr) {
  AlgoCandidate c[16];
  const int n = count < 16 ? count : 16;
  for (int i = 0; i < n; ++i) c[i] = candidate(perf[i], lowp);
  const int i = choose_conv_algo(c, n, lowp, allow_nondeterministic);
  if (i < 0) return false;
  algo = perf[i].algo;
  bytes = perf[i].memory;
  if (nondeterministic) *nondeterministic = !c[i].deterministic;
  return true;
}

// The plan of g for tensors of `type`, made on first use; nullptr when cuDNN
// has no deterministic algorithm we accept for one of the passes (then an
// f32 plan leaves g to im2col; without a 16-bit one, conv2d_lowp_available
// is false and the backend runs g in f32).
const Plan* plan_for(CudnnEngine& e, const ConvGeom& g, PlanType type = PlanType::F32) {
  std::lock_guard<std::mutex> lock(e.mutex);
  auto& slot = e.plans[{key_of(g), type}];
  if (slot) return slot.get();
  auto p = std::make_unique<Plan>();
  p->lowp = type != PlanType::F32;
  const cudnnDataType_t dt = type == PlanType::BF16 ? CUDNN_DATA_BFLOAT16
                             : type == PlanType::F16 ? CUDNN_DATA_HALF
                                                     : CUDNN_DATA_FLOAT;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, dt, as_int(g.n, "n"),
                                         as_int(g.c, "c"), as_int(g.h, "h"), as_int(g.w, "w")));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, dt, as_int(g.n, "n"),
                                         as_int(g.k, "k"), as_int(g.oh(), "oh"), as_int(g.ow(), "ow")));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, dt, CUDNN_TENSOR_NCHW, as_int(g.k, "k"),
                                         as_int(g.c / g.groups, "c/groups"), as_int(g.r, "r"), as_int(g.s, "s")));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, as_int(g.pad_h, "pad_h"), as_int(g.pad_w, "pad_w"),
                                              as_int(g.stride_h, "stride_h"), as_int(g.stride_w, "stride_w"),
                                              as_int(g.dil_h, "dil_h"), as_int(g.dil_w, "dil_w"),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));  // f32 compute, whatever dt
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, as_int(g.groups, "groups")));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->lowp ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  constexpr int kAsk = 16;
  int got = 0;
  size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  size_t data_any_bytes = 0, filter_any_bytes = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kAsk];
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(e.handle, p->x, p->w, p->conv, p->y, kAsk, &got, fwd));
  const bool ok_fwd = pick(fwd, got, p->lowp, false, p->fwd, fwd_bytes);
  cudnnConvolutionBwdDataAlgoPerf_t data[kAsk];
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(e.handle, p->w, p->y, p->conv, p->x, kAsk, &got, data));
  const bool ok_data = pick(data, got, p->lowp, false, p->bwd_data, data_bytes) &&
                       pick(data, got, p->lowp, true, p->bwd_data_any, data_any_bytes, &p->data_any_nondeterministic);
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kAsk];
  CUDNN_CHECK(
      cudnnGetConvolutionBackwardFilterAlgorithm_v7(e.handle, p->x, p->y, p->conv, p->w, kAsk, &got, filter));
  const bool ok_filter =
      pick(filter, got, p->lowp, false, p->bwd_filter, filter_bytes) &&
      pick(filter, got, p->lowp, true, p->bwd_filter_any, filter_any_bytes, &p->filter_any_nondeterministic);
  // A geometry runs on cuDNN only where every pass has a deterministic
  // algorithm, so that the option changes no path, only backward algorithms.
  if (!ok_fwd || !ok_data || !ok_filter) return nullptr;  // slot stays empty: asked again, cheaply refused
  p->workspace = std::max({fwd_bytes, data_bytes, filter_bytes});
  p->workspace_any = std::max({p->workspace, data_any_bytes, filter_any_bytes});
  slot = std::move(p);
  return slot.get();
}

const Plan* cudnn_plan(const ConvContext& ctx, const ConvGeom& g) {
  if (!ctx.cudnn) return nullptr;
  return plan_for(*static_cast<CudnnEngine*>(ctx.cudnn), g);
}

const Plan* cudnn_plan_lowp(const ConvContext& ctx, const ConvGeom& g, HalfType t) {
  if (!ctx.cudnn) return nullptr;
  return plan_for(*static_cast<CudnnEngine*>(ctx.cudnn), g, t == HalfType::BF16 ? PlanType::BF16 : PlanType::F16);
}

#endif  // REMAT_HAVE_CUDNN

constexpr size_t kLowpAlign = 256;
size_t align_up(size_t b) { return (b + kLowpAlign - 1) / kLowpAlign * kLowpAlign; }

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
  if (const Plan* p = cudnn_plan(ctx, g)) return p->workspace_for(ctx.nondeterministic_backward);
#endif
  (void)ctx;
  return im2col_workspace(g);
}

ConvBackwardAlgos conv2d_backward_algos(const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_backward_algos", g);
#ifdef REMAT_HAVE_CUDNN
  if (!ctx.nondeterministic_backward) return {};
  if (const Plan* p = cudnn_plan(ctx, g)) return {p->data_any_nondeterministic, p->filter_any_nondeterministic};
#endif
  (void)ctx;
  return {};
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
    const bool any = ctx.nondeterministic_backward;
    need_workspace("conv2d_bwd", ctx, p->workspace_for(any));
    const float one = 1.0f, dx_beta = accumulate ? 1.0f : 0.0f;
    auto* e = static_cast<CudnnEngine*>(ctx.cudnn);
    if (dW)
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(e->handle, &one, p->x, x, p->y, dy, p->conv, p->filter_algo(any),
                                                 ctx.workspace, ctx.workspace_bytes, &one, p->w, dW));
    if (dx)
      CUDNN_CHECK(cudnnConvolutionBackwardData(e->handle, &one, p->w, W, p->y, dy, p->conv, p->data_algo(any),
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
  // A forward: the deterministic backward-data algorithm, with or without the option.
  ConvContext forward = ctx;
  forward.nondeterministic_backward = false;
  conv2d_bwd(g, nullptr, W, x, y, nullptr, nullptr, false, forward);
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

// ---- 16-bit convolutions (mixed precision) -----------------------------------------

namespace remat::cuda {
namespace {

void widen16(HalfType t, const uint16_t* src, float* dst, int64_t n, cudaStream_t stream) {
  if (t == HalfType::BF16) bf16_to_f32(src, dst, n, stream);
  else f16_to_f32(src, dst, n, stream);
}

}  // namespace

bool conv2d_lowp_available(HalfType t, const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_lowp_available", g);
#ifdef REMAT_HAVE_CUDNN
  return cudnn_plan_lowp(ctx, g, t) != nullptr;
#else
  (void)t;
  (void)ctx;
  return false;
#endif
}

size_t conv2d_lowp_workspace_bytes(HalfType t, const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_lowp_workspace_bytes", g);
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan_lowp(ctx, g, t))
    return align_up(p->workspace_for(ctx.nondeterministic_backward)) +
           align_up(sizeof(uint16_t) * static_cast<size_t>(g.weight_numel()));
#endif
  (void)t;
  (void)ctx;
  throw std::invalid_argument("conv2d_lowp_workspace_bytes: cuDNN has no deterministic 16-bit algorithm here");
}

ConvBackwardAlgos conv2d_lowp_backward_algos(HalfType t, const ConvGeom& g, const ConvContext& ctx) {
  check("conv2d_lowp_backward_algos", g);
#ifdef REMAT_HAVE_CUDNN
  if (!ctx.nondeterministic_backward) return {};
  if (const Plan* p = cudnn_plan_lowp(ctx, g, t)) return {p->data_any_nondeterministic, p->filter_any_nondeterministic};
#endif
  (void)t;
  (void)ctx;
  return {};
}

void conv2d_fwd_lowp(HalfType t, const ConvGeom& g, const uint16_t* x, const uint16_t* W, const float* b,
                     uint16_t* y16, float* y, const ConvContext& ctx) {
  check("conv2d_fwd_lowp", g);
  if (b && !y) throw std::invalid_argument("conv2d_fwd_lowp: a bias needs the f32 output");
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan_lowp(ctx, g, t)) {
    need_workspace("conv2d_fwd_lowp", ctx, align_up(p->workspace));
    const float one = 1.0f, zero = 0.0f;  // f32 scaling factors: the compute type's
    auto* e = static_cast<CudnnEngine*>(ctx.cudnn);
    CUDNN_CHECK(cudnnConvolutionForward(e->handle, &one, p->x, x, p->w, W, p->conv, p->fwd, ctx.workspace,
                                        p->workspace, &zero, p->y, y16));
    if (y) widen16(t, y16, y, g.n * g.k * g.oh() * g.ow(), ctx.stream);
    if (b) add_bias(g, y, b, ctx.stream);
    return;
  }
#endif
  (void)t, (void)x, (void)W, (void)b, (void)y16, (void)y;
  throw std::invalid_argument("conv2d_fwd_lowp: cuDNN has no deterministic 16-bit algorithm for this convolution");
}

void conv2d_bwd_lowp(HalfType t, const ConvGeom& g, const uint16_t* x, const uint16_t* W, const uint16_t* dy,
                     const float* dy32, uint16_t* dx16, float* dx, float* dW, float* db, const ConvContext& ctx) {
  check("conv2d_bwd_lowp", g);
  if ((dx && !dx16) || (db && !dy32))
    throw std::invalid_argument("conv2d_bwd_lowp: dx needs its 16-bit staging and db the f32 dy");
  if (db) bias_grad(g, dy32, db, ctx.stream);
#ifdef REMAT_HAVE_CUDNN
  if (const Plan* p = cudnn_plan_lowp(ctx, g, t)) {
    const bool any = ctx.nondeterministic_backward;
    const size_t cudnn_bytes = p->workspace_for(any), ws = align_up(cudnn_bytes);
    const size_t dw_bytes = sizeof(uint16_t) * static_cast<size_t>(g.weight_numel());
    need_workspace("conv2d_bwd_lowp", ctx, ws + (dW ? align_up(dw_bytes) : 0));
    const float one = 1.0f, zero = 0.0f;
    auto* e = static_cast<CudnnEngine*>(ctx.cudnn);
    if (dx) {
      CUDNN_CHECK(cudnnConvolutionBackwardData(e->handle, &one, p->w, W, p->y, dy, p->conv, p->data_algo(any),
                                               ctx.workspace, cudnn_bytes, &zero, p->x, dx16));
      widen16(t, dx16, dx, g.n * g.c * g.h * g.w, ctx.stream);
    }
    if (dW) {
      // The 16-bit weight gradient is staged after cuDNN's own workspace.
      auto* dw16 = reinterpret_cast<uint16_t*>(static_cast<char*>(ctx.workspace) + ws);
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(e->handle, &one, p->x, x, p->y, dy, p->conv, p->filter_algo(any),
                                                 ctx.workspace, cudnn_bytes, &zero, p->w, dw16));
      widen16(t, dw16, dW, g.weight_numel(), ctx.stream);
    }
    return;
  }
#endif
  (void)t, (void)x, (void)W, (void)dy, (void)dx, (void)dW;
  throw std::invalid_argument("conv2d_bwd_lowp: cuDNN has no deterministic 16-bit algorithm for this convolution");
}

}  // namespace remat::cuda
