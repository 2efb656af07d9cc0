// Float32 reference kernels of every op kind, on plain row-major host arrays.
// The CPU backend calls these; the CUDA kernels in gpu/ mirror them one for one
// and are tested against them. Shapes are (rows, features) unless stated.
//
// Gradient outputs follow one rule so that strategies cannot change results:
// `accumulate == false` overwrites the destination, `true` adds to it (a tensor
// with several consumers receives their gradients in reverse topological order,
// which every strategy keeps). Parameter gradients always accumulate into
// zero-initialised buffers.
#pragma once
#include <array>
#include <cstdint>

#include "core/kernels/pad_geom.h"
#include "core/kernels/pointwise_fns.h"

namespace remat::cpu {

enum class Act : int { None = 0, ReLU = 1, Tanh = 2, GELU = 3, Sigmoid = 4, SiLU = 5 };

// y (rows, out) = x (rows, in) · Wᵀ + b;  W is (out, in) as in PyTorch, b is (out)
// or null (no bias; then db is null too).
void linear_fwd(const float* x, const float* W, const float* b, float* y,
                int64_t rows, int64_t in, int64_t out);
// dx (rows, in) = dy · W;  dW (out, in) += dyᵀ · x;  db (out) += Σ_rows dy.
void linear_bwd(const float* x, const float* W, const float* dy, float* dx,
                float* dW, float* db, int64_t rows, int64_t in, int64_t out,
                bool accumulate);

// Elementwise activations over n elements. Backward of ReLU, Tanh and Sigmoid
// reads the output y; backward of GELU (exact, erf form, as torch.nn.GELU())
// and SiLU (x·sigmoid(x)) reads the input x, as PyTorch's derivatives do.
void act_fwd(Act act, const float* x, float* y, int64_t n);
void act_bwd(Act act, const float* x_or_y, const float* dy, float* dx, int64_t n,
             bool accumulate);

// Dense = Linear followed by an activation, fused (the teaching chain's op).
// Backward reads the input x and the output y (act ∈ {None, ReLU, Tanh}; GELU is
// not allowed here because its backward needs the pre-activation).
// `scratch` holds rows*out floats for the pre-activation gradient (unused, and
// may be null, for Act::None: the gradient is dy itself).
void dense_fwd(Act act, const float* x, const float* W, const float* b, float* y,
               int64_t rows, int64_t in, int64_t out);
void dense_bwd(Act act, const float* x, const float* y, const float* W, const float* dy,
               float* dx, float* dW, float* db, float* scratch, int64_t rows,
               int64_t in, int64_t out, bool accumulate);

// LayerNorm over the last dimension, eps (PyTorch's default 1e-5) added to the
// variance in double, affine gamma/beta (cols).
// The three norms (LayerNorm, GroupNorm, BatchNorm) take gamma = beta = null
// for a norm without affine parameters (elementwise_affine=False,
// affine=False): as gamma 1 and beta 0, the same bits; the backward then
// takes dgamma = dbeta = null and forms no parameter gradient.
// `stats` holds 2*rows floats: all row means, then all row rstds (stored beside y in the
// op's activation so that backward can read them).
void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y,
                   float* stats, int64_t rows, int64_t cols, double eps = 1e-5);
void layernorm_bwd(const float* x, const float* stats, const float* gamma,
                   const float* dy, float* dx, float* dgamma, float* dbeta,
                   int64_t rows, int64_t cols, bool accumulate);

// y = a + b. Backward is the identity to each input (callers use add_into).
void add_fwd(const float* a, const float* b, float* y, int64_t n);
// dst = src (accumulate == false) or dst += src.
void add_into(const float* src, float* dst, int64_t n, bool accumulate);

// Dropout with a counter-based mask: element i of op `op_id` is kept iff
// dropout_keep(seed, op_id, i, p); kept elements are scaled by 1/(1-p). The mask
// is never stored: recomputation regenerates it bit for bit.
bool dropout_keep(uint64_t seed, uint32_t op_id, uint64_t i, float p);
void dropout_fwd(const float* x, float* y, int64_t n, float p, uint64_t seed,
                 uint32_t op_id);
void dropout_bwd(const float* dy, float* dx, int64_t n, float p, uint64_t seed,
                 uint32_t op_id, bool accumulate);

// Mean squared error over n elements: loss = Σ (x - t)² / n; dx = 2 (x - t) / n.
float mse_fwd(const float* x, const float* target, int64_t n);
void mse_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate);

// Binary cross-entropy on logits over n elements (BCEWithLogitsLoss, mean):
// loss = Σ max(x, 0) - x·t + log(1 + exp(-|x|)) / n, the form that neither
// overflows nor loses log's argument near 1; dx = (σ(x) - t) / n, as
// PyTorch's backward computes it (σ(x) - t, then divided by n).
float bce_logits_fwd(const float* x, const float* target, int64_t n);
void bce_logits_bwd(const float* x, const float* target, float* dx, int64_t n, bool accumulate);

// Softmax cross-entropy, mean over rows: logits (rows, classes), labels (rows)
// with values in [0, classes). With label smoothing ε (PyTorch's
// label_smoothing) the target is (1 − ε)·onehot + ε/classes:
//   loss = Σ_rows (1 − ε)·(−log p_y) + ε·(−(1/classes)·Σ_c log p_c) / rows,
//   dx = (softmax − (1 − ε)·onehot − ε/classes) / rows,
// each row's terms summed in double and rounded once (ε = 0: the plain loss,
// the same bits as before smoothing existed).
float softmax_ce_fwd(const float* logits, const int32_t* labels, int64_t rows,
                     int64_t classes, double label_smoothing = 0);
void softmax_ce_bwd(const float* logits, const int32_t* labels, float* dx, int64_t rows,
                    int64_t classes, bool accumulate, double label_smoothing = 0);
// The same loss keeping what PyTorch's log_softmax + nll_loss keep for the
// backward: the log-probabilities logp (rows, classes), not the logits. The
// backward then reads logp alone: dx = (exp(logp) − (1 − ε)·onehot − ε/classes) / rows.
float softmax_ce_fwd_keep_logp(const float* logits, const int32_t* labels, float* logp, int64_t rows,
                               int64_t classes, double label_smoothing = 0);
void softmax_ce_bwd_from_logp(const float* logp, const int32_t* labels, float* dx, int64_t rows, int64_t classes,
                              bool accumulate, double label_smoothing = 0);

// ---- Convolution (conv.cpp) ------------------------------------------------------
// NCHW, as PyTorch; a 1-D convolution is the 2-D one with h = r = 1. Weights
// (k, c/groups, r, s), bias (k) or none. Output (n, k, oh, ow) with
// oh = (h + 2·pad_h − dil_h·(r−1) − 1) / stride_h + 1, likewise ow.
struct ConvGeom {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t k = 1, r = 1, s = 1;         // output channels, kernel height and width
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  int64_t oh() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t ow() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
  int64_t weight_numel() const { return k * (c / groups) * r * s; }
};
// Throws std::invalid_argument naming the field: non-positive sizes, groups
// not dividing c and k, an empty output.
void check_conv(const ConvGeom& g);
// Images that share one GEMM (a run): enough for 512 output columns, at most n.
int64_t conv2d_images_per_gemm(const ConvGeom& g);
// Floats of scratch conv2d_fwd/conv2d_bwd need: a run's im2col columns,
// (c/groups·r·s, run·oh·ow), and when a run has several images, its output or
// dy rows, (k/groups, run·oh·ow).
int64_t conv2d_scratch_floats(const ConvGeom& g);
// y = conv(x, W) + b (b may be null).
void conv2d_fwd(const ConvGeom& g, const float* x, const float* W, const float* b, float* y, float* scratch);
// dx = or += conv_transpose(dy, W) (dx may be null: not computed); dW += ...
// (dW may be null: not computed, and x is not read: a transposed convolution's
// forward); db += Σ dy over (n, oh, ow) (db may be null).
void conv2d_bwd(const ConvGeom& g, const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                bool accumulate, float* scratch);

// ---- Group normalisation (groupnorm.cpp) ---------------------------------------------
// x (n, c, hw), statistics per (sample, group of c/groups channels) over
// (c/groups)·hw values: mean and rstd = 1/sqrt(biased var + eps) into
// mean/rstd (n·groups each); y = (x − mean)·rstd·gamma[ch] + beta[ch].
void groupnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                   int64_t n, int64_t c, int64_t hw, int64_t groups, double eps);
// dx = or += the gradient; dgamma, dbeta (c) += Σ dy·x̂, Σ dy.
void groupnorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                   float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw, int64_t groups,
                   bool accumulate);

// ---- Nearest and bilinear resizing (upsample.cpp) ------------------------------------
// Output index o of a dimension resized from `in` to `out` reads inputs i0 and
// i1 with weights w0 and w1 (nearest: i0 alone, w0 = 1), as PyTorch computes them.
struct UpsampleTap {
  int64_t i0 = 0, i1 = 0;
  float w0 = 1, w1 = 0;
};
UpsampleTap upsample_tap(int64_t o, int64_t in, int64_t out, bool bilinear, bool align_corners);
// x (planes, ih, iw) -> y (planes, oh, ow).
void upsample_fwd(const float* x, float* y, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners);
// dx = or += each output's dy added into the inputs it read, in output order.
void upsample_bwd(const float* dy, float* dx, int64_t planes, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                  bool bilinear, bool align_corners, bool accumulate);

// ---- Batch normalisation, training mode (batchnorm.cpp) ----------------------------
// x (n, c, hw): batch statistics per channel over n·hw values. y = (x − mean)·invstd·gamma
// + beta with invstd = 1/sqrt(biased var + eps); saved (c) mean and invstd for the
// backward (PyTorch's save_mean/save_invstd). running_mean/var (c, may be null) are
// updated as PyTorch: running = (1 − momentum)·running + momentum·batch, the variance
// unbiased (·m/(m−1)).
void batchnorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* save_mean,
                   float* save_invstd, float* running_mean, float* running_var, int64_t n, int64_t c, int64_t hw,
                   float eps, float momentum);
// dx = or += the training-mode gradient; dgamma += Σ dy·x̂; dbeta += Σ dy.
void batchnorm_bwd(const float* x, const float* dy, const float* gamma, const float* save_mean,
                   const float* save_invstd, float* dx, float* dgamma, float* dbeta, int64_t n, int64_t c, int64_t hw,
                   bool accumulate);

// ---- Pooling (pooling.cpp) -----------------------------------------------------------
// NCHW windows kh×kw, stride, zero padding, as PyTorch's CPU kernels. Max pooling
// keeps the flat index (ih·w + iw) of each maximum within its input plane, as
// PyTorch's int64 indices (the first maximum wins; padding never does), and may
// dilate its window. With ceil_mode the output rounds up (a last window may pass
// the padded edge, but starts inside the input or the left padding). Average
// pooling divides by the window clipped to the padded input (count_include_pad,
// PyTorch's default) or by the elements inside the input; an adaptive one
// (out_h > 0: PyTorch's adaptive_avg_pool2d) has out_h×out_w windows
// [floor(i·h/out_h), ceil((i+1)·h/out_h)) and ignores kernel, stride and padding.
struct PoolGeom {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;    // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;   // average pooling only
  int64_t out_h = 0, out_w = 0;    // adaptive average pooling's output; 0: not adaptive
  bool adaptive() const { return out_h > 0; }
  // PyTorch's pooling_output_shape along one axis.
  static int64_t out_len(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, bool ceil) {
    const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    int64_t out = (span + (ceil ? stride - 1 : 0)) / stride + 1;
    if (ceil && (out - 1) * stride >= in + pad) --out;
    return out;
  }
  int64_t oh() const { return adaptive() ? out_h : out_len(h, kh, stride_h, pad_h, dil_h, ceil_mode); }
  int64_t ow() const { return adaptive() ? out_w : out_len(w, kw, stride_w, pad_w, dil_w, ceil_mode); }
};
void check_pool(const PoolGeom& g);  // std::invalid_argument, as check_conv
void check_max(const PoolGeom& g);   // check_pool, and not adaptive
void check_avg(const PoolGeom& g);   // check_pool, and no dilation
void maxpool2d_fwd(const PoolGeom& g, const float* x, float* y, int64_t* indices);
// dx = or += the gradient routed to each window's maximum (summed where windows overlap).
void maxpool2d_bwd(const PoolGeom& g, const float* dy, const int64_t* indices, float* dx, bool accumulate);
// Adaptive: y = (window sum) / kh_i / kw_j, two divisions, as PyTorch's kernel.
void avgpool2d_fwd(const PoolGeom& g, const float* x, float* y);
void avgpool2d_bwd(const PoolGeom& g, const float* dy, float* dx, bool accumulate);
// Mean over each (n, c) plane of hw values: y (n, c).
void global_avgpool_fwd(const float* x, float* y, int64_t nc, int64_t hw);
void global_avgpool_bwd(const float* dy, float* dx, int64_t nc, int64_t hw, bool accumulate);

// ---- Attention pieces (attention.cpp) ------------------------------------------------
// c (batch, m, n) = a (batch, m, k) · b (batch, k, n), each operand optionally
// transposed in its last two axes (trans_a: a is stored (batch, k, m)).
void bmm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a,
         bool trans_b, bool accumulate);
// The same with batch strides in floats (0: one matrix for every product),
// the products done in order: c_i = or += op(a + i·stride_a) · op(b + i·stride_b).
void gemm_strided(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool trans_a, bool trans_b, bool accumulate, int64_t stride_a, int64_t stride_b, int64_t stride_c);
// Backward of c = op(a)·op(b): da = or += dc·op(b)ᵀ (into a's stored layout), db likewise.
// da or db may be null.
void bmm_bwd(const float* a, const float* b, const float* dc, float* da, float* db, int64_t batch, int64_t m,
             int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate_a, bool accumulate_b);
// Softmax over the last axis of (rows, cols); the backward reads the output y.
void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_bwd(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate);
// y = alpha·x (Mul/Div by a constant); dx = or += alpha·dy.
void scale_fwd(const float* x, float* y, int64_t n, float alpha);
void scale_bwd(const float* dy, float* dx, int64_t n, float alpha, bool accumulate);
// y = x where mask == 0, value where mask != 0; the mask (mask_n elements, 1 byte
// each) repeats over x (n = reps·mask_n), as a causal (T, T) mask over batch·heads.
void masked_fill_fwd(const float* x, const uint8_t* mask, float* y, int64_t n, int64_t mask_n, float value);
void masked_fill_bwd(const float* dy, const uint8_t* mask, float* dx, int64_t n, int64_t mask_n, bool accumulate);

// ---- Fused scaled dot-product attention (sdpa.cpp) ------------------------------------
// out = softmax(q·kᵀ·scale) · v for each of batch·heads heads, as PyTorch's
// CPU flash kernel: q (tq, d), k (tk, d) and v (tk, dv) per head, read
// through element strides (batch, head, row, column) since they are usually
// views of one projection; out (batch, heads, tq, dv) through its strides
// (PyTorch lays it out in q's dimension order; its columns are adjacent,
// out_strides[3] = 1); lse (batch, heads, tq) each row's log Σ exp, the
// backward's only extra input; dout and the gradients contiguous in their
// logical shapes.
// Causal: query i attends to keys j <= i (top-left, PyTorch's is_causal).
struct SdpaGeom {
  int64_t batch = 1, heads = 1, tq = 0, tk = 0, d = 0, dv = 0;
  bool causal = false;
  float scale = 1;
  std::array<int64_t, 4> q_strides{}, k_strides{}, v_strides{}, out_strides{};
  // An additive mask (PyTorch's float attn_mask, -inf where a key is hidden),
  // added to the scaled scores: element (b, h, i, j) at mask[Σ index·stride]
  // (stride 0 where it broadcasts); in device memory for the CUDA kernels.
  // Null: none. A row every key of which is hidden gives NaN, as PyTorch's.
  const float* mask = nullptr;
  std::array<int64_t, 4> mask_strides{};
  // Row-major (batch, heads, tq, dv): out_strides for a contiguous output.
  static std::array<int64_t, 4> dense_strides(int64_t heads, int64_t rows, int64_t cols) {
    return {heads * rows * cols, rows * cols, cols, 1};
  }
  // Throws std::invalid_argument, naming fn, when a dimension or the scale is
  // not positive or out's columns are not adjacent (both backends' check).
  void check(const char* fn) const;
  // Floats of scratch the forward and the backward need (the larger): one
  // head's gathered q, k, v, its scores and their gradient, its fresh gradients.
  int64_t scratch_floats() const;
};
void sdpa_fwd(const SdpaGeom& g, const float* q, const float* k, const float* v, float* out, float* lse,
              float* scratch);
// dq, dk, dv (contiguous, the inputs' logical shapes; each may be null) = or
// += their gradients; the backward recomputes the scores and reads out, lse
// and dout. With accumulate the fresh gradient is formed aside and added.
void sdpa_bwd(const SdpaGeom& g, const float* q, const float* k, const float* v, const float* out,
              const float* lse, const float* dout, float* dq, float* dk, float* dv, bool acc_q, bool acc_k,
              bool acc_v, float* scratch);

// ---- Tensor plumbing (plumbing.cpp) ---------------------------------------------------
// Concatenation along one axis: each input is (outer, widths[i]·inner) once
// flattened around the axis; y is (outer, Σwidths·inner).
void concat_fwd(const float* const* xs, const int64_t* widths, int64_t count, float* y, int64_t outer, int64_t inner);
// dx[i] = or += its slice of dy (dxs[i] may be null: that input has no gradient).
void concat_bwd(const float* dy, float* const* dxs, const int64_t* widths, int64_t count, int64_t outer,
                int64_t inner, const uint8_t* accumulate);
// Embedding lookup: y (n, dim) = table[idx[i]]; idx in [0, vocab) (out of range throws).
// Token ids come as int32 or int64 (PyTorch's Long), whichever the input holds.
void embedding_fwd(const float* table, const int32_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab);
void embedding_fwd(const float* table, const int64_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab);
// dtable += Σ over positions of dy rows, each table row summing its positions in
// increasing order (no atomics: deterministic on every backend).
void embedding_bwd(const float* dy, const int32_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab);
void embedding_bwd(const float* dy, const int64_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab);

// ---- By a constant (constants.cpp) --------------------------------------------------
// y = x ∘ c with ∘ one of ·, /, + and c (cn elements) repeating over x (n = reps·cn):
// a scalar (cn = 1) or a tensor broadcast over the leading dimensions, as a
// position table over the batch. x / c divides (as PyTorch), never multiplies
// by a reciprocal.
enum class ConstOp : int { Mul = 0, Div = 1, Add = 2 };
void const_fwd(ConstOp op, const float* x, const float* c, float* y, int64_t n, int64_t cn);
// dx = or += dy·c, dy/c or dy.
void const_bwd(ConstOp op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn, bool accumulate);
// A learned added constant: dc += Σ over the repeats of dy, repeats in increasing order.
void const_add_param_grad(const float* dy, float* dc, int64_t n, int64_t cn);


// ---- The pointwise family and reductions (pointwise.cpp) -------------------------------
// One function of pointwise_fns.h over a broadcast index: the output
// (rank dimensions, row-major, contiguous) and up to three operands, operand k
// read at Σ idx[d]·stride[k][d] from its pointer (stride 0 along a dimension it
// broadcasts or an expanded view repeats). dims[k][d] is operand k's own
// extent along output dimension d (1 where it broadcasts): its gradient's shape.
struct PwGeom {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int arity = 1;
  int64_t stride[3][kMaxRank] = {};
  int64_t dims[3][kMaxRank] = {};
  pw::Fn fn = pw::Fn::Neg;
  float p = 0, q = 0;  // the function's attributes (pointwise_fns.h)
  // The forward's output through these strides instead of row-major (a
  // Concat writes each input into its slice of the result).
  bool out_strided = false;
  int64_t out_stride[kMaxRank] = {};
  int64_t numel() const;
};
// y (contiguous, or through out_stride) = fn(x[0], x[1], x[2]); x[k] unused past the arity.
void pointwise_fwd(const PwGeom& g, const float* const x[3], float* y);
// dx (operand k's own shape, contiguous) = or += Σ over the dimensions it
// broadcasts of dy·∂fn/∂x_k, each element's terms summed in the output's
// row-major order in double. x[j] and y may be null where the derivative does
// not read them (pw::kFns' reads); they then read as 0.
void pointwise_bwd(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
                   bool accumulate);
// The same geometry with its dimensions of size 1 dropped and neighbours
// merged where every operand reads them as one run (and the forward's output
// writes them so) and each operand keeps both or broadcasts both: the same
// element offsets, each operand's own row-major order and the backward's
// summation order, over fewer dimensions (pointwise_geom.cpp).
PwGeom coalesced(const PwGeom& g);

// Sum, mean or amax of x (rank dimensions, read through element strides) over
// the dimensions marked reduced; y contiguous over the kept ones (keepdim
// changes no element). Sums in double, in row-major order of the reduced
// positions; amax propagates NaN.
struct ReduceGeom {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  pw::ReduceFn fn = pw::ReduceFn::Sum;
  int64_t count() const;  // elements each output reduces
};
void reduce_fwd(const ReduceGeom& g, const float* x, float* y);
// dx (x's shape, contiguous) = or += dy spread back: sum as is, mean divided by
// the count, amax to the maxima only, split evenly among ties (PyTorch's
// formula; x and y are read only for amax).
void reduce_bwd(const ReduceGeom& g, const float* x, const float* y, const float* dy, float* dx, bool accumulate);

// ---- Top-k and gather (select.cpp) ----------------------------------------------
// torch.topk's indices: for each line of x along `axis` (x read through its
// element strides), the positions of its k largest values, largest first, a
// tie to the lower position and NaN above every number (PyTorch's order);
// written as int64 into `index` (x's shape with the axis k long, contiguous).
struct TopKGeom {
  static constexpr int kMaxRank = 8;
  int rank = 0, axis = 0;
  int64_t k = 1;
  int64_t shape[kMaxRank] = {};   // x's
  int64_t stride[kMaxRank] = {};  // x's element strides
  int64_t lines() const;          // x's elements / its axis extent
};
void topk_fwd(const TopKGeom& g, const float* x, int64_t* index);
// torch.gather(x, axis, index): y (the index's shape, contiguous) at position p
// is x at p with its axis coordinate index[p]; x and the index are read
// through their element strides. Index values are in [0, x_shape[axis]).
struct GatherGeom {
  static constexpr int kMaxRank = 8;
  int rank = 0, axis = 0;
  int64_t shape[kMaxRank] = {};     // the index's (and y's)
  int64_t i_stride[kMaxRank] = {};  // the index's element strides
  int64_t x_shape[kMaxRank] = {};
  int64_t x_stride[kMaxRank] = {};
  int64_t numel() const;    // y's elements
  int64_t x_numel() const;  // x's elements
};
void gather_fwd(const GatherGeom& g, const float* x, const int64_t* index, float* y);
// dx (x's shape, contiguous) = or += for each element the sum of dy over the
// positions whose index picks it, along the axis in increasing order, in
// double (the CUDA kernel's order: no atomics, recomputation stays bitwise).
void gather_bwd(const GatherGeom& g, const int64_t* index, const float* dy, float* dx, bool accumulate);

// ---- Padding (pad.cpp; the index rules in pad_index.h) -----------------------------
// y (g.out, dense) from x (g.in, dense): each element read or the fill.
void pad_fwd(const PadGeom& g, const float* x, float* y);
// dx (g.in) = or += each element's sum of dy over the outputs that read it,
// in PyTorch's order (pad_index.h's pad_grad: PyTorch's CPU bits).
void pad_bwd(const PadGeom& g, const float* dy, float* dx, bool accumulate);

// torch.cumsum over a dense tensor seen as (outer, len, inner), the axis len
// long (scan.cpp): y[o, i, j] = Σ_{k <= i} x[o, k, j], summed in double in k
// order and rounded per output (PyTorch's CPU kernel). The backward is dx
// (= or +=) Σ_{k >= i} dy[o, k, j], summed in double from the end (PyTorch's
// flip, cumsum, flip), rounded, then added when accumulate.
struct ScanGeom {
  int64_t outer = 1, len = 1, inner = 1;
};
void cumsum_fwd(const ScanGeom& g, const float* x, float* y);
void cumsum_bwd(const ScanGeom& g, const float* dy, float* dx, bool accumulate);

}  // namespace remat::cpu
