// CUDA mirror of core/kernels/cpu_kernels.h: the same float32 ops with the same
// shapes, row-major layouts and gradient rules, on device pointers. Each launcher
// takes the CPU function's arguments in the same order (the losses add an output
// pointer, see below), then the cuBLAS handle (linear and dense only) and the
// stream; all work is queued on that stream and nothing synchronises. Shapes are
// (rows, features) unless stated.
//
// Gradient rule (as on the CPU): `accumulate == false` overwrites dx (its old
// contents are never read, NaN included), `true` adds to it. Parameter gradients
// (dW, db, dgamma, dbeta) always add.
//
// Determinism: every result is bit-identical from run to run on the same GPU.
// Reductions are fixed-order block reductions (no atomics), and the GEMM launchers
// put the handle in CUBLAS_ATOMICS_NOT_ALLOWED, CUBLAS_DEFAULT_MATH (no TF32) and
// host pointer mode before each call. cuBLAS promises the same bits only for one
// handle used from one stream: give each stream its own handle (or set
// CUBLAS_WORKSPACE_CONFIG, see the cuBLAS "Results reproducibility" notes).
// The launchers set the handle's stream only when it is not already `stream`
// (cublasSetStream resets a workspace set with cublasSetWorkspace).
// Results may differ from the CPU kernels by float32 rounding (summation order,
// tanhf/erff, fused multiply-adds), never in dropout masks.
//
// Errors throw remat::cuda::CudaError (gpu/cuda_check.h); invalid arguments
// (negative sizes, GELU in dense) throw std::invalid_argument before any launch.
// Empty tensors are allowed and launch nothing (the losses still write their scalar).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/kernels/cpu_kernels.h"

namespace remat::cuda {

using Act = remat::cpu::Act;

// ---- linear.cu ------------------------------------------------------------------

// y (rows, out) = x (rows, in) · Wᵀ + b;  W (out, in), b (out).
void linear_fwd(const float* x, const float* W, const float* b, float* y, int64_t rows,
                int64_t in, int64_t out, cublasHandle_t cublas, cudaStream_t stream);
// dx (rows, in) = dy (rows, out) · W;  dW (out, in) += dyᵀ · x;  db (out) += Σ_rows dy.
void linear_bwd(const float* x, const float* W, const float* dy, float* dx, float* dW,
                float* db, int64_t rows, int64_t in, int64_t out, bool accumulate,
                cublasHandle_t cublas, cudaStream_t stream);

// y (rows, out) = act(x · Wᵀ + b), the activation fused into the bias epilogue.
// act ∈ {None, ReLU, Tanh}; GELU throws std::invalid_argument (its backward would
// need the pre-activation, which dense does not keep).
void dense_fwd(Act act, const float* x, const float* W, const float* b, float* y,
               int64_t rows, int64_t in, int64_t out, cublasHandle_t cublas,
               cudaStream_t stream);
// Backward from x (rows, in) and y (rows, out); scratch (rows, out) receives the
// pre-activation gradient (for Act::None dy is used as is and scratch is left
// untouched). dx, dW, db as in linear_bwd.
void dense_bwd(Act act, const float* x, const float* y, const float* W, const float* dy,
               float* dx, float* dW, float* db, float* scratch, int64_t rows, int64_t in,
               int64_t out, bool accumulate, cublasHandle_t cublas, cudaStream_t stream);

// ---- gemm_lowp.cu, linear.cu: tensor-core GEMMs on 16-bit operands ---------------
// Mixed precision's products (docs/gpu.md#mixed-precision-on-tensor-cores):
// operands as bf16 or f16 codes (uint16_t), f32 accumulation, f32 results;
// bitwise reproducible from run to run (gemm_lowp.cu says how), within a
// rounding bound of the exact sum (tests/gpu/test_gpu_gemm_lowp.cpp), not the
// f32 path's bits.
enum class HalfType : uint8_t { BF16, F16 };
// Row-major c (batch, m, n) = op(a)·op(b) + beta·c: a stored (m, k), or (k, m)
// when trans_a; b stored (k, n), or (n, k) when trans_b; batch strides in
// elements, the matrices' sizes unless given (0: one matrix for every entry).
// k == 0 writes zeros (beta == 0) or leaves c; beta == 0 never reads c.
void gemm_lowp(HalfType t, const uint16_t* a, const uint16_t* b, float* c, int64_t batch, int64_t m, int64_t n,
               int64_t k, bool trans_a, bool trans_b, float beta, cublasHandle_t cublas, cudaStream_t stream,
               int64_t stride_a = -1, int64_t stride_b = -1, int64_t stride_c = -1);
// linear_fwd / dense_fwd with x and W in 16 bits: y (f32) = act(x·Wᵀ + b),
// b f32 (may be null), the epilogue linear_fwd's. act: None, ReLU, Tanh.
void linear_fwd_lowp(HalfType t, Act act, const uint16_t* x, const uint16_t* W, const float* b, float* y,
                     int64_t rows, int64_t in, int64_t out, cublasHandle_t cublas, cudaStream_t stream);
// linear_bwd with x, W and dy in 16 bits; dy_f32 (the same values) feeds the
// bias gradient (db may be null). dx, dW, db as in linear_bwd, all f32.
void linear_bwd_lowp(HalfType t, const uint16_t* x, const uint16_t* W, const uint16_t* dy, const float* dy_f32,
                     float* dx, float* dW, float* db, int64_t rows, int64_t in, int64_t out, bool accumulate,
                     cublasHandle_t cublas, cudaStream_t stream);

// ---- pointwise_io.cu: mixed precision's memory-bound kernels on stored tensors ---
// (docs/gpu.md#16-bit-loads-and-stores; core/exec/pointwise_path.h's lowp_io.)
// Each operand as stored: f32, or bf16/f16 codes (uint16_t). Each kernel
// computes in f32 exactly as its f32 kernel (named at the function) and
// stores the result as the widening call would: rounded once to the
// destination's dtype (nearest even), or with `add` (a gradient that adds)
// the f32 sum of the stored value and the rounded result, rounded once; an
// f32 destination: = v, or += v. So the bits are widen -> f32 kernel -> narrow's.
enum class IoType : uint8_t { F32, BF16, F16 };
struct IoIn {
  const void* p = nullptr;
  IoType t = IoType::F32;
};
struct IoOut {
  void* p = nullptr;
  IoType t = IoType::F32;
  bool add = false;
};
void act_fwd_io(Act act, IoIn x, IoOut y, int64_t n, cudaStream_t stream);                 // act_fwd
void act_bwd_io(Act act, IoIn x_or_y, IoIn dy, IoOut dx, int64_t n, cudaStream_t stream);  // act_bwd
void const_fwd_io(remat::cpu::ConstOp op, IoIn x, const float* c, IoOut y, int64_t n, int64_t cn, cudaStream_t stream);
void const_bwd_io(remat::cpu::ConstOp op, IoIn dy, const float* c, IoOut dx, int64_t n, int64_t cn, cudaStream_t stream);
void masked_fill_fwd_io(IoIn x, const uint8_t* mask, IoOut y, int64_t n, int64_t mask_n, float value,
                        cudaStream_t stream);
void masked_fill_bwd_io(IoIn dy, const uint8_t* mask, IoOut dx, int64_t n, int64_t mask_n, cudaStream_t stream);
// dropout_fwd and dropout_bwd alike (in: x or dy, out: y or dx).
void dropout_io(IoIn in, IoOut out, int64_t n, float p, uint64_t seed, uint32_t op_id, cudaStream_t stream);
void add_fwd_io(IoIn a, IoIn b, IoOut y, int64_t n, cudaStream_t stream);
// dst = src as add_into copies it (Add's backward).
void copy_io(IoIn src, IoOut dst, int64_t n, cudaStream_t stream);
void softmax_fwd_io(IoIn x, IoOut y, int64_t rows, int64_t cols, cudaStream_t stream);
void softmax_bwd_io(IoIn y, IoIn dy, IoOut dx, int64_t rows, int64_t cols, cudaStream_t stream);

// ---- activations.cu -------------------------------------------------------------

// y (n) = act(x (n)). GELU is the exact erf form (torch.nn.GELU()).
void act_fwd(Act act, const float* x, float* y, int64_t n, cudaStream_t stream);
// dx (n) from dy (n) and x_or_y (n): the output y for ReLU and Tanh, the input x for
// GELU; ignored for None.
void act_bwd(Act act, const float* x_or_y, const float* dy, float* dx, int64_t n,
             bool accumulate, cudaStream_t stream);

// ---- layernorm.cu ---------------------------------------------------------------

// y (rows, cols) = (x - mean) · rstd · gamma (cols) + beta (cols), eps PyTorch's 1e-5
// unless the model says otherwise.
// stats (2, rows): the means of all rows, then their rstd = 1 / sqrt(biased var + eps),
// the CPU layout; y is computed from these rounded stats, the values backward reads.
void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y,
                   float* stats, int64_t rows, int64_t cols, cudaStream_t stream, float eps = 1e-5f);
// dx (rows, cols) from x, stats (2, rows), gamma (cols), dy (rows, cols);
// dgamma (cols) += Σ_rows dy · x̂;  dbeta (cols) += Σ_rows dy.
void layernorm_bwd(const float* x, const float* stats, const float* gamma, const float* dy,
                   float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                   bool accumulate, cudaStream_t stream);

// ---- elementwise.cu -------------------------------------------------------------

// y (n) = a (n) + b (n).
void add_fwd(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// dst (n) = src (n) (accumulate == false) or dst += src.
void add_into(const float* src, float* dst, int64_t n, bool accumulate, cudaStream_t stream);

// Element i of op `op_id` is kept iff remat::rng_keep(seed, op_id, i, p) (the same
// function the CPU mask uses, core/kernels/rng.h); kept elements are scaled by
// 1.0f/(1.0f-p), the CPU's very float, dropped ones are 0 (p == 1 drops all).
// p outside [0, 1] throws std::invalid_argument. y (n) from x (n); dx (n) from dy (n).
void dropout_fwd(const float* x, float* y, int64_t n, float p, uint64_t seed,
                 uint32_t op_id, cudaStream_t stream);
void dropout_bwd(const float* dy, float* dx, int64_t n, float p, uint64_t seed,
                 uint32_t op_id, bool accumulate, cudaStream_t stream);

// ---- losses.cu ------------------------------------------------------------------
// The CPU versions return the loss; here it is written (not added) to the device
// scalar `loss` (1 float), so that nothing synchronises: copy it back when needed.

// *loss = Σ (x - target)² / n over x (n), target (n); n == 0 gives NaN (0/0, as the CPU).
void mse_fwd(const float* x, const float* target, float* loss, int64_t n, cudaStream_t stream);
// dx (n) = 2 (x - target) / n.
void mse_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate,
             cudaStream_t stream);
// *loss = Σ max(x, 0) - x·t + log1p(exp(-|x|)) / n (BCEWithLogitsLoss, mean); dx (n) = (σ(x) - t) / n.
void bce_logits_fwd(const float* x, const float* target, float* loss, int64_t n, cudaStream_t stream);
void bce_logits_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate,
                    cudaStream_t stream);

// *loss = mean over rows of -log softmax(logits)[label]; logits (rows, classes),
// labels (rows) in [0, classes). A label out of range makes the loss NaN (a device
// kernel cannot throw, where the CPU throws; NaN cannot go unnoticed); rows == 0
// gives NaN (0/0, as the CPU). With `partials`, device memory for at least
// softmax_ce_partial_count(rows) doubles that the call may overwrite (the backend
// lends its cuBLAS workspace), the rows are spread over the whole grid;
// without, one block does them all, which took 25 ms for GPT-2's 4096 × 50257
// logits on an H100. Either way every sum has an order fixed by rows alone.
// label_smoothing ε: the target (1 − ε)·onehot + ε/classes, as cpu_kernels.h's
// (0: the plain loss, its bits unchanged); the same for every launcher below.
void softmax_ce_fwd(const float* logits, const int32_t* labels, float* loss, int64_t rows,
                    int64_t classes, cudaStream_t stream, double* partials = nullptr,
                    int64_t partial_capacity = 0, double label_smoothing = 0);
int64_t softmax_ce_partial_count(int64_t rows);
// dx (rows, classes) = (softmax(logits) - onehot(labels)) / rows; a row with a label
// out of range gets NaN.
void softmax_ce_bwd(const float* logits, const int32_t* labels, float* dx, int64_t rows,
                    int64_t classes, bool accumulate, cudaStream_t stream, double label_smoothing = 0);
// The same loss keeping the log-probabilities logp (rows, classes) for the
// backward, as PyTorch's log_softmax + nll_loss (cpu_kernels.h's
// softmax_ce_fwd_keep_logp); the backward reads logp alone.
void softmax_ce_fwd_keep_logp(const float* logits, const int32_t* labels, float* loss, float* logp, int64_t rows,
                              int64_t classes, cudaStream_t stream, double* partials = nullptr,
                              int64_t partial_capacity = 0, double label_smoothing = 0);
void softmax_ce_bwd_from_logp(const float* logp, const int32_t* labels, float* dx, int64_t rows, int64_t classes,
                              bool accumulate, cudaStream_t stream, double label_smoothing = 0);
// Mixed precision's cross-entropy on its logits as stored (pointwise_io.cu's
// rule: the f32 launchers' values; dx stored as the widening call stores
// it): the loss (and with logp, the kept log-probabilities, f32) from bf16/
// f16 or f32 logits; dx from the logits or from logp.
void softmax_ce_fwd_io(IoIn logits, const int32_t* labels, float* loss, float* logp, int64_t rows, int64_t classes,
                       cudaStream_t stream, double* partials = nullptr, int64_t partial_capacity = 0,
                       double label_smoothing = 0);
void softmax_ce_bwd_io(IoIn logits, const int32_t* labels, IoOut dx, int64_t rows, int64_t classes,
                       cudaStream_t stream, double label_smoothing = 0);
void softmax_ce_bwd_from_logp_io(const float* logp, const int32_t* labels, IoOut dx, int64_t rows, int64_t classes,
                                 cudaStream_t stream, double label_smoothing = 0);

// ---- conv.cu ---------------------------------------------------------------------
// NCHW convolution (cpu_kernels.h: ConvGeom). With cuDNN (REMAT_HAVE_CUDNN) the
// launchers use its deterministic algorithms with FMA math (no TF32), chosen
// once per geometry; without it, or with ConvContext::use_cudnn false, im2col
// and cuBLAS GEMMs one image at a time. Either way the workspace is the
// caller's: conv2d_workspace_bytes() says how much, ConvContext hands it over.
using remat::cpu::ConvGeom;
struct ConvContext {
  cublasHandle_t cublas = nullptr;
  void* cudnn = nullptr;  // a cudnnHandle_t bound to `stream`, or null: im2col + cuBLAS
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // remat run --nondeterministic-backward: cuDNN's backward-data and
  // backward-filter calls take its first-ranked algorithm whatever its
  // determinism (conv.cu); the forward passes (a transposed convolution's
  // included) do not change. The workspace sizes below follow it.
  bool nondeterministic_backward = false;
};
// Which backward pass of a convolution runs a non-deterministic algorithm
// under a context (false, false without the option and on im2col).
struct ConvBackwardAlgos {
  bool data_nondeterministic = false;
  bool filter_nondeterministic = false;
};
// True when this build has cuDNN (REMAT_HAVE_CUDNN).
bool cudnn_available();
// A cuDNN handle bound to `stream` (destroy with cudnn_destroy); throws CudaError
// without cuDNN.
void* cudnn_create(cudaStream_t stream);
void cudnn_destroy(void* handle) noexcept;
// Bytes of workspace the forward and the backward of g need (the larger).
size_t conv2d_workspace_bytes(const ConvGeom& g, const ConvContext& ctx);
// True when g runs on cuDNN: ctx has a handle and cuDNN offered deterministic
// FMA-math algorithms for all three passes; false means im2col + cuBLAS.
bool conv2d_uses_cudnn(const ConvGeom& g, const ConvContext& ctx);
// What conv2d_bwd runs for g under ctx (a transposed convolution's backward
// runs g's backward-filter).
ConvBackwardAlgos conv2d_backward_algos(const ConvGeom& g, const ConvContext& ctx);
void conv2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y,
                const ConvContext& ctx);
// dx (may be null) = or += ; dW (may be null: x is then not read) += ; db (may be null) += .
void conv2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx,
                float* dW, float* db, bool accumulate, const ConvContext& ctx);
// A transposed convolution as the convolution g it is the gradient of
// (remat::conv_transpose_geom): y (g's input shape) = g's input gradient of x
// (g's output shape), cuDNN's backward-data where g runs on cuDNN, plus the
// bias b (g.c, may be null).
void conv_transpose2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y,
                          const ConvContext& ctx);
// dx (may be null; g's output shape) = g's forward of dy, into dx_scratch and
// added when `accumulate`; dW += g's weight gradient (dy as its input, x as
// its dy); db (may be null) += Σ dy per channel.
void conv_transpose2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx,
                          float* dx_scratch, float* dW, float* db, bool accumulate, const ConvContext& ctx);
// Mixed precision's convolutions (docs/gpu.md#mixed-precision-on-tensor-cores):
// cuDNN on 16-bit x, W and dy (bf16 or f16, f32 compute, tensor-op math, its
// deterministic algorithms only; conv.cu says which), cuDNN only. Available
// when cuDNN offers such an algorithm for all three passes of g in type t
// (where not, the backend runs the convolution in f32).
bool conv2d_lowp_available(HalfType t, const ConvGeom& g, const ConvContext& ctx);
// The workspace they need: cuDNN's for the chosen algorithms, then (256-byte
// aligned) the 16-bit weight gradient's staging. Throws std::invalid_argument
// where conv2d_lowp_available does not hold.
size_t conv2d_lowp_workspace_bytes(HalfType t, const ConvGeom& g, const ConvContext& ctx);
// What conv2d_bwd_lowp runs for g in t under ctx.
ConvBackwardAlgos conv2d_lowp_backward_algos(HalfType t, const ConvGeom& g, const ConvContext& ctx);
// y16 = the convolution in t (cuDNN's rounding to t), y = y16 widened + b (b may be null;
// y may be null without b: y16 is then the result).
void conv2d_fwd_lowp(HalfType t, const ConvGeom& g, const uint16_t* x, const uint16_t* W, const float* b,
                     uint16_t* y16, float* y, const ConvContext& ctx);
// dx16 = the input gradient in t, dx = dx16 widened (dx may be null; then
// dx16 is not written); dW = the weight gradient in t (staged in the
// workspace), widened: set, not added; db (may be null) += Σ dy32 per
// channel, dy32 being dy widened (read only for db).
void conv2d_bwd_lowp(HalfType t, const ConvGeom& g, const uint16_t* x, const uint16_t* W, const uint16_t* dy,
                     const float* dy32, uint16_t* dx16, float* dx, float* dW, float* db, const ConvContext& ctx);

// ---- groupnorm.cu ----------------------------------------------------------------
// As the CPU's (cpu_kernels.h), sums in double with a fixed block tree.
void groupnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                   int64_t n, int64_t c, int64_t hw, int64_t groups, double eps, cudaStream_t stream);
void groupnorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                   float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, int64_t groups,
                   bool accumulate, cudaStream_t stream);

// ---- upsample.cu -----------------------------------------------------------------
// As the CPU's; the backward gathers each input's gradient in output order.
void upsample_fwd(const float* x, float* y, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, cudaStream_t stream);
void upsample_bwd(const float* dy, float* dx, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, bool accumulate, cudaStream_t stream);

// ---- pad.cu ----------------------------------------------------------------------
// As the CPU's (the same index rules); the backward gathers each input's
// gradient in row-major output order.
void pad_fwd(const PadGeom& g, const float* x, float* y, cudaStream_t stream);
void pad_bwd(const PadGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream);

// ---- batchnorm.cu ----------------------------------------------------------------
// As the CPU: fixed-order sums in double. Without `partials`, one block per
// channel; with device memory for batchnorm_partial_count(n, c, hw) doubles
// that the call may overwrite (the backend lends its cuBLAS workspace), each
// channel is split over several blocks, whose sums a second kernel adds in
// order (ResNet-50's batch norms took 20 ms a step on an H100 one block a
// channel, cuDNN's 6). Either way every sum's order is fixed by the shape.
void batchnorm_fwd(const float* x, const float* gamma, const float* beta, float* y,
                   float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                   int64_t n, int64_t c, int64_t hw, float eps, float momentum, cudaStream_t stream,
                   double* partials = nullptr, int64_t capacity = 0);
void batchnorm_bwd(const float* x, const float* dy, const float* gamma, const float* save_mean,
                   const float* save_invstd, float* dx, float* dgamma, float* dbeta, int64_t n,
                   int64_t c, int64_t hw, bool accumulate, cudaStream_t stream, double* partials = nullptr,
                   int64_t capacity = 0);
// 0 where the shape runs one block a channel anyway (more than 65535 channels).
int64_t batchnorm_partial_count(int64_t n, int64_t c, int64_t hw);
// Mixed precision's batch norm on tensors as stored (pointwise_io.cu's rule:
// the f32 launchers' values, stored as the widening call stores them; x, y,
// dy, dx f32 or bf16/f16; no running statistics, momentum 0.1, as the
// backend's entry). dx.p null: no input gradient.
void batchnorm_fwd_io(IoIn x, const float* gamma, const float* beta, IoOut y, float* save_mean, float* save_invstd,
                      int64_t n, int64_t c, int64_t hw, float eps, cudaStream_t stream, double* partials = nullptr,
                      int64_t capacity = 0);
void batchnorm_bwd_io(IoIn x, IoIn dy, const float* gamma, const float* save_mean, const float* save_invstd, IoOut dx,
                      float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, cudaStream_t stream,
                      double* partials = nullptr, int64_t capacity = 0);

// ---- pooling.cu ------------------------------------------------------------------
// Backward passes gather (each input element sums the windows that chose or
// cover it, in window order) instead of scattering with atomics.
using remat::cpu::PoolGeom;
void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices,
                   cudaStream_t stream);
void maxpool2d_bwd(const PoolGeom& g, const float* dy, const int64_t* indices, float* dx,
                   bool accumulate, cudaStream_t stream);
void avgpool2d_fwd(const PoolGeom& g, const float* x, float* y, cudaStream_t stream);
void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate,
                   cudaStream_t stream);
void global_avgpool_fwd(const float* x, float* y, int64_t nc, int64_t hw, cudaStream_t stream);
void global_avgpool_bwd(const float* dy, float* dx, int64_t nc, int64_t hw, bool accumulate,
                        cudaStream_t stream);

// ---- attention.cu ----------------------------------------------------------------
// bmm: cuBLAS strided-batched SGEMM (no TF32), the CPU's layouts.
void bmm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
         bool trans_a, bool trans_b, bool accumulate, cublasHandle_t cublas, cudaStream_t stream);
void bmm_bwd(const float* a, const float* b, const float* dc, float* da, float* db, int64_t batch,
             int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate_a,
             bool accumulate_b, cublasHandle_t cublas, cudaStream_t stream);
// bmm with batch strides in floats (0: one matrix for every product), as the
// CPU's gemm_strided; the c matrices must be distinct (stride_c != 0 unless batch is 1).
void gemm_strided(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool trans_a, bool trans_b, bool accumulate, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, cublasHandle_t cublas, cudaStream_t stream);
void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
void softmax_bwd(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                 bool accumulate, cudaStream_t stream);
void scale_fwd(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);
void scale_bwd(const float* dy, float* dx, int64_t n, float alpha, bool accumulate,
               cudaStream_t stream);
void masked_fill_fwd(const float* x, const uint8_t* mask, float* y, int64_t n, int64_t mask_n,
                     float value, cudaStream_t stream);
void masked_fill_bwd(const float* dy, const uint8_t* mask, float* dx, int64_t n, int64_t mask_n,
                     bool accumulate, cudaStream_t stream);

// ---- sdpa.cu ---------------------------------------------------------------------
// Fused scaled dot-product attention (cpu_kernels.h: SdpaGeom): out (batch,
// heads, tq, dv) through out_strides (columns adjacent) and lse (batch, heads,
// tq) from q, k, v read through their strides; dout contiguous; the backward recomputes the probabilities from lse. One warp per
// query row (forward, dq) or key row (dk, dv), the other side in shared tiles,
// every sum in a fixed order (no atomics). Head dimensions d, dv up to 256
// (larger throws std::invalid_argument). The kernels use no scratch (the
// pointer, SdpaGeom::scratch_floats() floats, may be null). dq, dk, dv as the
// CPU's: each may be null; one buffer for q, k, v being one tensor works (dq
// stored first, then dk and dv added, element by element in that order).
using remat::cpu::SdpaGeom;
void sdpa_fwd(const SdpaGeom& g, const float* q, const float* k, const float* v, float* out, float* lse,
              float* scratch, cudaStream_t stream);
void sdpa_bwd(const SdpaGeom& g, const float* q, const float* k, const float* v, const float* out,
              const float* lse, const float* dout, float* dq, float* dk, float* dv, bool acc_q, bool acc_k,
              bool acc_v, float* scratch, cudaStream_t stream);
// Mixed precision's fused attention on tensors as stored (pointwise_io.cu's
// rule; core/exec/pointwise_path.h's lowp_io): q, k, v, out and dout read
// as stored through the same strides, every value after the load the f32
// kernels' own (one source: the kernels are templates on how they load and
// store), out rounded once to its dtype, each gradient (dq, dk, dv: null p
// for none; three distinct tensors) rounded once and stored or, with `add`,
// added as the widening call adds it; lse f32 as above. The bits are widen ->
// sdpa_fwd/sdpa_bwd (accumulate off) -> the widening call's store.
void sdpa_fwd_io(const SdpaGeom& g, IoIn q, IoIn k, IoIn v, IoOut out, float* lse, cudaStream_t stream);
void sdpa_bwd_io(const SdpaGeom& g, IoIn q, IoIn k, IoIn v, IoIn out, const float* lse, IoIn dout, IoOut dq,
                 IoOut dk, IoOut dv, cudaStream_t stream);

// ---- plumbing.cu -----------------------------------------------------------------
// xs, dxs, widths and accumulate are host arrays (of device pointers, sizes, flags).
void concat_fwd(const float* const* xs, const int64_t* widths, int64_t count, float* y,
                int64_t outer, int64_t inner, cudaStream_t stream);
void concat_bwd(const float* dy, float* const* dxs, const int64_t* widths, int64_t count,
                int64_t outer, int64_t inner, const uint8_t* accumulate, cudaStream_t stream);
// dst (contiguous, logical row-major order) = the elements of src read through
// shape/stride (host arrays, rank <= 8): a non-contiguous view made contiguous.
void strided_copy(const float* src, float* dst, const int64_t* shape, const int64_t* stride, int rank,
                  cudaStream_t stream);
// dst read through shape/stride += src (contiguous): a Transpose's or Slice's
// gradient onto its input; the map must be one to one (no stride 0).
void strided_add(const float* src, float* dst, const int64_t* shape, const int64_t* stride, int rank,
                 cudaStream_t stream);
// dx (n_in, the Expand's input in row-major order) = or += the sum of the dy
// elements (the view's shape, row-major) that the view's map (shape/stride,
// host arrays, rank <= 8, stride 0 where it repeats) sends to each, added in
// increasing view order: the CPU's bits, with no atomics.
void expand_bwd(const float* dy, float* dx, const int64_t* shape, const int64_t* stride, int rank, int64_t n_in,
                bool accumulate, cudaStream_t stream);
// idx is a device array; an index out of [0, vocab) gives a NaN row (a kernel
// cannot throw; NaN cannot go unnoticed), where the CPU throws.
void embedding_fwd(const float* table, const int32_t* idx, float* y, int64_t n, int64_t dim,
                   int64_t vocab, cudaStream_t stream);
void embedding_fwd(const float* table, const int64_t* idx, float* y, int64_t n, int64_t dim,
                   int64_t vocab, cudaStream_t stream);
// dtable += per row, its positions summed in increasing order (one block per
// table row; no atomics): the CPU's order, so the same bits. any_order
// (remat run --nondeterministic-backward): by atomicAdd, one thread an
// element, the positions of a repeated token summed in any order.
void embedding_bwd(const float* dy, const int32_t* idx, float* dtable, int64_t n, int64_t dim,
                   int64_t vocab, cudaStream_t stream, bool any_order = false);
void embedding_bwd(const float* dy, const int64_t* idx, float* dtable, int64_t n, int64_t dim,
                   int64_t vocab, cudaStream_t stream, bool any_order = false);

// ---- constants.cu ----------------------------------------------------------------
// As the CPU's (cpu_kernels.h): c (cn elements, device) repeats over x (n = reps·cn).
using remat::cpu::ConstOp;
void const_fwd(ConstOp op, const float* x, const float* c, float* y, int64_t n, int64_t cn,
               cudaStream_t stream);
void const_bwd(ConstOp op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn,
               bool accumulate, cudaStream_t stream);
// dc += Σ over the repeats of dy: one thread per element of c, repeats in
// increasing order (the CPU's order, no atomics).
void const_add_param_grad(const float* dy, float* dc, int64_t n, int64_t cn, cudaStream_t stream);

// ---- convert.cu ------------------------------------------------------------------
// Compressed checkpoints (core/kernels/convert.h, the same bits): f32 to
// bfloat16 / IEEE half codes and back, round to nearest even; int8 with one
// f32 scale per tensor, `packed` = the scale then the n codes (4 + n bytes).
void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
void f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void f16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
void f32_to_int8(const float* x, void* packed, int64_t n, cudaStream_t stream);
void int8_to_f32(const void* packed, float* y, int64_t n, cudaStream_t stream);
// Mixed precision's element-wise steps (core/exec/mixed_call.h, the CPU's
// bits): x rounded in place to bf16 / f16 values; g (16-bit codes) += c with
// the sum rounded once; x *= s; y += x.
void round_bf16(float* x, int64_t n, cudaStream_t stream);
void round_f16(float* x, int64_t n, cudaStream_t stream);
void add_to_bf16(uint16_t* g, const float* c, int64_t n, cudaStream_t stream);
void add_to_f16(uint16_t* g, const float* c, int64_t n, cudaStream_t stream);
void scale_f32(float* x, int64_t n, float s, cudaStream_t stream);
void add_f32(float* y, const float* x, int64_t n, cudaStream_t stream);

// ---- pointwise.cu ---------------------------------------------------------------------
// The pointwise family and the reductions, as cpu_kernels.h's pointwise_fwd,
// pointwise_bwd, reduce_fwd and reduce_bwd (same geometry; a broadcast
// operand's gradient and a sum add their terms in double, a sum in row-major
// order, one thread per result element; a gradient with many terms an
// element by a warp or a column of threads in a fixed order: the same bits
// every run, the CPU's but for a rounding tie of the double sum).
using remat::cpu::PwGeom;
using remat::cpu::ReduceGeom;
void pointwise_fwd(const PwGeom& g, const float* const x[3], float* y, cudaStream_t stream);
void pointwise_bwd(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
                   bool accumulate, cudaStream_t stream);
// The same on tensors as stored (pointwise_io.cu's contract, docs/gpu.md#16-bit-loads-and-stores):
// each operand, y and dy in f32, bf16 or f16 (a null pointer reads as 0),
// computed in f32 with the expressions and summation order above, the result
// stored as the widening call stores it (y narrowed; dx rounded, then stored
// or, with dx.add, added to the stored value and rounded once).
void pointwise_fwd_io(const PwGeom& g, const IoIn x[3], IoOut y, cudaStream_t stream);
void pointwise_bwd_io(const PwGeom& g, int k, const IoIn x[3], IoIn y, IoIn dy, IoOut dx, cudaStream_t stream);
void reduce_fwd(const ReduceGeom& g, const float* x, float* y, cudaStream_t stream);
void reduce_bwd(const ReduceGeom& g, const float* x, const float* y, const float* dy, float* dx, bool accumulate,
                cudaStream_t stream);

// ---- select.cu -------------------------------------------------------------------------
// torch.topk's indices and torch.gather, as cpu_kernels.h's topk_fwd,
// gather_fwd and gather_bwd: the same picks (largest first, a tie to the lower
// position, NaN first), and the gather's gradient per element of x, summing
// its picks along the axis in increasing order in double (the same bits).
using remat::cpu::GatherGeom;
using remat::cpu::TopKGeom;
void topk_fwd(const TopKGeom& g, const float* x, int64_t* index, cudaStream_t stream);
void gather_fwd(const GatherGeom& g, const float* x, const int64_t* index, float* y, cudaStream_t stream);
void gather_bwd(const GatherGeom& g, const int64_t* index, const float* dy, float* dx, bool accumulate,
                cudaStream_t stream);

// ---- scan.cu ---------------------------------------------------------------------------
// torch.cumsum as cpu_kernels.h's cumsum_fwd and cumsum_bwd: one thread per
// line, summed in double in the CPU's order (the same bits).
using remat::cpu::ScanGeom;
void cumsum_fwd(const ScanGeom& g, const float* x, float* y, cudaStream_t stream);
void cumsum_bwd(const ScanGeom& g, const float* dy, float* dx, bool accumulate, cudaStream_t stream);

// ---- gate.cu ---------------------------------------------------------------------------
// One thread that returns once *open (mapped host memory, as the device sees
// it) is non-zero, or after limit_ns nanoseconds (then *timed_out, device
// memory or mapped, is incremented): gated_timer.h's hold on the stream.
void gate_hold(const int* open, int* timed_out, uint64_t limit_ns, cudaStream_t stream);

}  // namespace remat::cuda
