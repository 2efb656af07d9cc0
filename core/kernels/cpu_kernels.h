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
#include <cstdint>

namespace remat::cpu {

enum class Act : int { None = 0, ReLU = 1, Tanh = 2, GELU = 3 };

// y (rows, out) = x (rows, in) · Wᵀ + b;  W is (out, in) as in PyTorch, b is (out).
void linear_fwd(const float* x, const float* W, const float* b, float* y,
                int64_t rows, int64_t in, int64_t out);
// dx (rows, in) = dy · W;  dW (out, in) += dyᵀ · x;  db (out) += Σ_rows dy.
void linear_bwd(const float* x, const float* W, const float* dy, float* dx,
                float* dW, float* db, int64_t rows, int64_t in, int64_t out,
                bool accumulate);

// Elementwise activations over n elements. Backward of ReLU and Tanh reads the
// output y; backward of GELU (exact, erf form, as torch.nn.GELU()) reads the input x.
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

// LayerNorm over the last dimension, eps = 1e-5, affine gamma/beta (cols).
// `stats` holds 2*rows floats: all row means, then all row rstds (stored beside y in the
// op's activation so that backward can read them).
void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y,
                   float* stats, int64_t rows, int64_t cols);
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

// Softmax cross-entropy, mean over rows: logits (rows, classes), labels (rows)
// with values in [0, classes). dx = (softmax - onehot) / rows.
float softmax_ce_fwd(const float* logits, const int32_t* labels, int64_t rows,
                     int64_t classes);
void softmax_ce_bwd(const float* logits, const int32_t* labels, float* dx, int64_t rows,
                    int64_t classes, bool accumulate);

}  // namespace remat::cpu
