// Scalar losses: mean squared error and softmax cross-entropy. The loss is written
// to a device float rather than returned, so that nothing synchronises. Loss sums
// accumulate in double (as the CPU reference does) in trees fixed by the sizes
// alone (one block, or the cross-entropy's per-block sums then one block): the
// value never depends on scheduling, and it does not drift with batch size.
// The cross-entropy's kernels are templates on how the logits and dx are
// stored (lowp_io.cuh): f32 pointers for the f32 launchers, bf16/f16 logits
// and gradients as stored for the *_io ones of mixed precision
// (docs/gpu.md#16-bit-loads-and-stores), the same values from the same
// (exactly widened) inputs.
#include <cmath>

#include "gpu/kernels/device_common.cuh"
#include "gpu/kernels/lowp_io.cuh"

namespace remat::cuda {
namespace {

constexpr int kLossBlock = 1024;  // one block does the whole sum
constexpr int kRowsPerBlock = 8;  // softmax's grid-wide kernels: one warp per row
constexpr int64_t kMaxLossPartials = 1024;  // blocks of softmax_ce_partials_kernel, at most

using detail::ld;
using detail::st;

// ---- kernels ------------------------------------------------------------------

// *loss = Σ (x - t)² / n over x (n), t (n). One block.
__global__ void mse_fwd_kernel(const float* x, const float* t, float* loss, int64_t n) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(x[i]) - t[i];
    sum += d * d;
  }
  sum = detail::block_sum(sum, shared);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(n));
}

// dx (n) = or += 2 (x - t) / n, with k = 2/n computed once, as on the CPU.
__global__ void mse_bwd_kernel(const float* x, const float* t, float* dx, int64_t n, float k,
                               bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&dx[i], k * (x[i] - t[i]), accumulate);
}

// BCEWithLogitsLoss, mean: Σ max(x, 0) - x·t + log1p(exp(-|x|)) in double by one
// block (as the CPU's bce_logits_fwd), and dx = or += (σ(x) - t) / n.
__global__ void bce_logits_fwd_kernel(const float* x, const float* t, float* loss, int64_t n) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = x[i];
    sum += fmax(v, 0.0) - v * t[i] + log1p(exp(-fabs(v)));
  }
  sum = detail::block_sum(sum, shared);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(n));
}

__global__ void bce_logits_bwd_kernel(const float* x, const float* t, float* dx, int64_t n, float count,
                                      bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    detail::store_grad(&dx[i], (1.0f / (1.0f + expf(-x[i])) - t[i]) / count, accumulate);
}

// Max and Σ exp(x - max) of one row (classes), computed by a whole warp; every lane
// gets the same values.
struct RowStats {
  float max;
  float sum;
};
// The row starts at element `row` of x.
template <class X>
__device__ RowStats warp_row_stats(X x, int64_t row, int64_t classes, int lane) {
  float mx = -INFINITY;
  for (int64_t c = lane; c < classes; c += 32) mx = fmaxf(mx, ld(x, row + c));
  mx = detail::warp_max(mx);
  float sum = 0.0f;
  for (int64_t c = lane; c < classes; c += 32) sum += expf(ld(x, row + c) - mx);
  return {mx, detail::warp_sum(sum)};
}

// Row r's term of the loss, max + log Σ exp(x - max) - x[label], in double,
// computed by a whole warp (every lane gets it); NaN for a label out of range.
// With label smoothing eps: (1 - eps) times that plus eps times the row's mean
// of -log p, log Σ exp(x - max) - mean(x - max) (as the CPU's row_ce; the
// mean's sum in double, each lane's then the warp's butterfly).
template <class X>
__device__ double row_loss(X x, int64_t row, int32_t y, int64_t classes, int lane, double eps) {
  const RowStats s = warp_row_stats(x, row, classes, lane);
  if (!(y >= 0 && y < classes)) return NAN;
  const double log_sum = log(static_cast<double>(s.sum));
  const double nll = static_cast<double>(s.max - ld(x, row + y)) + log_sum;
  if (eps == 0.0) return nll;
  double shifted = 0.0;
  for (int64_t c = lane; c < classes; c += 32) shifted += static_cast<double>(ld(x, row + c) - s.max);
  shifted = detail::warp_sum(shifted);
  return (1.0 - eps) * nll + eps * (log_sum - shifted / static_cast<double>(classes));
}

// *loss = mean over rows of max + log Σ exp(x - max) - x[label]; logits (rows,
// classes), labels (rows). One block; warp w takes rows w, w + warps, ...
template <class X>
__global__ void softmax_ce_fwd_kernel(X logits, const int32_t* labels, float* loss,
                                      int64_t rows, int64_t classes, double eps) {
  __shared__ double shared[32];
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  double sum = 0.0;  // identical in every lane of a warp; lane 0's is counted
  for (int64_t r = threadIdx.x / 32; r < rows; r += warps)
    sum += row_loss(logits, r * classes, labels[r], classes, lane, eps);
  sum = detail::block_sum(lane == 0 ? sum : 0.0, shared);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(rows));
}

// The same loss over the whole grid: block b's warps take rows b·8 + w, then a
// grid's rows further on, each summing its rows' terms in double; warp sums are
// added in warp order into partials[b]. The grid depends on rows alone, so the
// order of every sum does too. Then sum_partials_kernel, one block, adds them.
template <class X>
__global__ void softmax_ce_partials_kernel(X logits, const int32_t* labels, double* partials,
                                           int64_t rows, int64_t classes, double eps) {
  __shared__ double warp_sums[kRowsPerBlock];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double sum = 0.0;  // identical in every lane of a warp
  for (int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + warp; r < rows; r += int64_t{gridDim.x} * kRowsPerBlock)
    sum += row_loss(logits, r * classes, labels[r], classes, lane, eps);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double b = 0.0;
    for (int w = 0; w < kRowsPerBlock; ++w) b += warp_sums[w];
    partials[blockIdx.x] = b;
  }
}

// *loss = Σ partials[0, count) / rows. One block.
__global__ void sum_partials_kernel(const double* partials, int64_t count, float* loss, int64_t rows) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = detail::block_sum(sum, shared);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / static_cast<double>(rows));
}

// dx (rows, classes) = or += (softmax - target) / rows, one warp per row; the
// target is hit·onehot + spread (label smoothing: hit = 1 - eps, spread =
// eps/classes; without, 1 and 0, which leave the plain loss's bits).
template <class X, class DX>
__global__ void softmax_ce_bwd_kernel(X logits, const int32_t* labels, DX dx,
                                      int64_t rows, int64_t classes, float inv_rows,
                                      bool accumulate, float hit, float spread) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32; r < rows;
       r += int64_t{gridDim.x} * kRowsPerBlock) {
    const int64_t row = r * classes;
    const int32_t y = labels[r];
    const bool valid = y >= 0 && y < classes;
    const RowStats s = warp_row_stats(logits, row, classes, lane);
    const float inv_sum = 1.0f / s.sum;
    for (int64_t c = lane; c < classes; c += 32) {
      const float prob = expf(ld(logits, row + c) - s.max) * inv_sum;
      const float v = valid ? ((c == y ? prob - hit : prob) - spread) * inv_rows : NAN;
      st(dx, row + c, v, accumulate);
    }
  }
}

// logp (rows, classes) = x - max - log Σ exp(x - max), one warp per row: what
// a cross-entropy that keeps its log-probabilities saves (ce_keeps_log_probs).
template <class X>
__global__ void log_softmax_rows_kernel(X logits, float* logp, int64_t rows, int64_t classes) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32; r < rows;
       r += int64_t{gridDim.x} * kRowsPerBlock) {
    const int64_t row = r * classes;
    const RowStats s = warp_row_stats(logits, row, classes, lane);
    const float lse = logf(s.sum);
    for (int64_t c = lane; c < classes; c += 32) logp[row + c] = ld(logits, row + c) - s.max - lse;
  }
}

// dx (rows, classes) = or += (exp(logp) - target) / rows, elementwise (the
// target as softmax_ce_bwd_kernel's).
template <class DX>
__global__ void softmax_ce_bwd_logp_kernel(const float* logp, const int32_t* labels, DX dx, int64_t rows,
                                           int64_t classes, float inv_rows, bool accumulate, float hit,
                                           float spread) {
  const int64_t n = rows * classes;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / classes, c = i % classes;
    const int32_t y = labels[r];
    const float prob = expf(logp[i]);
    const float v = (y >= 0 && y < classes) ? ((c == y ? prob - hit : prob) - spread) * inv_rows : NAN;
    st(dx, i, v, accumulate);
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void mse_fwd(const float* x, const float* target, float* loss, int64_t n, cudaStream_t stream) {
  detail::check_sizes("mse_fwd", {n});
  mse_fwd_kernel<<<1, kLossBlock, 0, stream>>>(x, target, loss, n);  // n == 0 writes NaN
  CUDA_CHECK_THROW(cudaGetLastError());
}

void mse_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate,
             cudaStream_t stream) {
  detail::check_sizes("mse_bwd", {n});
  if (n == 0) return;
  const float k = 2.0f / static_cast<float>(n);
  mse_bwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(x, target, dx, n, k,
                                                                     accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void bce_logits_fwd(const float* x, const float* target, float* loss, int64_t n, cudaStream_t stream) {
  detail::check_sizes("bce_logits_fwd", {n});
  bce_logits_fwd_kernel<<<1, kLossBlock, 0, stream>>>(x, target, loss, n);  // n == 0 writes NaN
  CUDA_CHECK_THROW(cudaGetLastError());
}

void bce_logits_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate,
                    cudaStream_t stream) {
  detail::check_sizes("bce_logits_bwd", {n});
  if (n == 0) return;
  bce_logits_bwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(x, target, dx, n,
                                                                            static_cast<float>(n), accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

int64_t softmax_ce_partial_count(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return blocks < 1 ? 1 : blocks < kMaxLossPartials ? blocks : kMaxLossPartials;
}

namespace {

// The smoothed target's two values, rounded once from double as the CPU's.
float target_hit(double eps) { return static_cast<float>(1.0 - eps); }
float target_spread(double eps, int64_t classes) { return static_cast<float>(eps / static_cast<double>(classes)); }

// The cross-entropy launchers' bodies, for f32 pointers and for tensors as stored alike.
template <class X>
void ce_fwd(X logits, const int32_t* labels, float* loss, int64_t rows, int64_t classes, cudaStream_t stream,
            double* partials, int64_t partial_capacity, double eps) {
  detail::check_sizes("softmax_ce_fwd", {rows, classes});
  // rows == 0 writes NaN (0/0); classes == 0 makes every label invalid, hence NaN.
  const int64_t count = softmax_ce_partial_count(rows);
  if (partials == nullptr || partial_capacity < count) {
    softmax_ce_fwd_kernel<<<1, kLossBlock, 0, stream>>>(logits, labels, loss, rows, classes, eps);
    CUDA_CHECK_THROW(cudaGetLastError());
    return;
  }
  softmax_ce_partials_kernel<<<static_cast<unsigned>(count), kRowsPerBlock * 32, 0, stream>>>(logits, labels,
                                                                                                partials, rows, classes, eps);
  CUDA_CHECK_THROW(cudaGetLastError());
  sum_partials_kernel<<<1, kLossBlock, 0, stream>>>(partials, count, loss, rows);
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <class X, class DX>
void ce_bwd(X logits, const int32_t* labels, DX dx, int64_t rows, int64_t classes, bool accumulate,
            cudaStream_t stream, double eps) {
  detail::check_sizes("softmax_ce_bwd", {rows, classes});
  if (rows == 0 || classes == 0) return;
  const float inv_rows = static_cast<float>(1.0 / static_cast<double>(rows));
  softmax_ce_bwd_kernel<<<detail::grid_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0,
                          stream>>>(logits, labels, dx, rows, classes, inv_rows, accumulate, target_hit(eps),
                                    target_spread(eps, classes));
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <class X>
void ce_fwd_keep_logp(X logits, const int32_t* labels, float* loss, float* logp, int64_t rows, int64_t classes,
                      cudaStream_t stream, double* partials, int64_t partial_capacity, double eps) {
  ce_fwd(logits, labels, loss, rows, classes, stream, partials, partial_capacity, eps);
  if (rows == 0 || classes == 0) return;
  log_softmax_rows_kernel<<<detail::grid_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(logits, logp,
                                                                                                     rows, classes);
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <class DX>
void ce_bwd_from_logp(const float* logp, const int32_t* labels, DX dx, int64_t rows, int64_t classes,
                      bool accumulate, cudaStream_t stream, double eps) {
  detail::check_sizes("softmax_ce_bwd_from_logp", {rows, classes});
  if (rows == 0 || classes == 0) return;
  const float inv_rows = static_cast<float>(1.0 / static_cast<double>(rows));
  softmax_ce_bwd_logp_kernel<<<detail::grid_for(rows * classes), detail::kBlock, 0, stream>>>(
      logp, labels, dx, rows, classes, inv_rows, accumulate, target_hit(eps), target_spread(eps, classes));
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace

void softmax_ce_fwd(const float* logits, const int32_t* labels, float* loss, int64_t rows,
                    int64_t classes, cudaStream_t stream, double* partials, int64_t partial_capacity,
                    double label_smoothing) {
  ce_fwd(logits, labels, loss, rows, classes, stream, partials, partial_capacity, label_smoothing);
}

void softmax_ce_bwd(const float* logits, const int32_t* labels, float* dx, int64_t rows,
                    int64_t classes, bool accumulate, cudaStream_t stream, double label_smoothing) {
  ce_bwd(logits, labels, dx, rows, classes, accumulate, stream, label_smoothing);
}

void softmax_ce_fwd_keep_logp(const float* logits, const int32_t* labels, float* loss, float* logp, int64_t rows,
                              int64_t classes, cudaStream_t stream, double* partials, int64_t partial_capacity,
                              double label_smoothing) {
  ce_fwd_keep_logp(logits, labels, loss, logp, rows, classes, stream, partials, partial_capacity, label_smoothing);
}

void softmax_ce_bwd_from_logp(const float* logp, const int32_t* labels, float* dx, int64_t rows, int64_t classes,
                              bool accumulate, cudaStream_t stream, double label_smoothing) {
  ce_bwd_from_logp(logp, labels, dx, rows, classes, accumulate, stream, label_smoothing);
}

void softmax_ce_fwd_io(IoIn logits, const int32_t* labels, float* loss, float* logp, int64_t rows, int64_t classes,
                       cudaStream_t stream, double* partials, int64_t partial_capacity, double label_smoothing) {
  if (logp)
    ce_fwd_keep_logp(detail::din(logits), labels, loss, logp, rows, classes, stream, partials, partial_capacity,
                     label_smoothing);
  else
    ce_fwd(detail::din(logits), labels, loss, rows, classes, stream, partials, partial_capacity, label_smoothing);
}

void softmax_ce_bwd_io(IoIn logits, const int32_t* labels, IoOut dx, int64_t rows, int64_t classes,
                       cudaStream_t stream, double label_smoothing) {
  ce_bwd(detail::din(logits), labels, detail::dout(dx), rows, classes, false, stream, label_smoothing);
}

void softmax_ce_bwd_from_logp_io(const float* logp, const int32_t* labels, IoOut dx, int64_t rows, int64_t classes,
                                 cudaStream_t stream, double label_smoothing) {
  ce_bwd_from_logp(logp, labels, detail::dout(dx), rows, classes, false, stream, label_smoothing);
}

}  // namespace remat::cuda
