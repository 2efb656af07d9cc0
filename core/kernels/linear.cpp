// Linear and the fused Dense (Linear + activation). GEMMs go through Eigen maps
// over the caller's row-major buffers, so nothing is copied or allocated here.
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/eigen.h"

namespace remat::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

// Dense's backward only has the output y, from which GELU's and SiLU's
// derivatives cannot be recovered, and cpu_kernels.h promises Dense None, ReLU
// and Tanh only. Rejecting the rest in the forward too keeps a bad model from
// running half way.
void check_dense_act(Act act) {
  if (act != Act::None && act != Act::ReLU && act != Act::Tanh) {
    throw std::invalid_argument("dense: activation " + std::to_string(static_cast<int>(act)) +
                                " is not supported (only None, ReLU and Tanh: GELU and SiLU need the "
                                "pre-activation in the backward)");
  }
}

}  // namespace

void linear_fwd(const float* x, const float* W, const float* b, float* y, int64_t rows, int64_t in,
                int64_t out) {
  const ConstMat X(x, rows, in);  // (rows, in)
  const ConstMat Wm(W, out, in);  // (out, in)
  Mat Y(y, rows, out);            // (rows, out)
  Y.noalias() = X * Wm.transpose();
  // Bias added after the product, not folded into its initial value, so that
  // the GEMM sees the same problem whatever b holds.
  if (!b) return;  // a Linear without bias (GPT's vocabulary projection)
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * out;
    for (int64_t o = 0; o < out; ++o) yr[o] += b[o];
  }
}

void linear_bwd(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                int64_t rows, int64_t in, int64_t out, bool accumulate) {
  const ConstMat X(x, rows, in);     // (rows, in)
  const ConstMat Wm(W, out, in);     // (out, in)
  const ConstMat dY(dy, rows, out);  // (rows, out)
  Mat dX(dx, rows, in);              // (rows, in)
  Mat dWm(dW, out, in);              // (out, in)
  if (accumulate) {
    dX.noalias() += dY * Wm;
  } else {
    dX.noalias() = dY * Wm;
  }
  dWm.noalias() += dY.transpose() * X;
  // Rows summed in order with plain loops: a fixed order keeps db reproducible.
  if (!db) return;
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * out;
    for (int64_t o = 0; o < out; ++o) db[o] += dyr[o];
  }
}

void dense_fwd(Act act, const float* x, const float* W, const float* b, float* y, int64_t rows,
               int64_t in, int64_t out) {
  check_dense_act(act);
  linear_fwd(x, W, b, y, rows, in, out);
  act_fwd(act, y, y, rows * out);
}

void dense_bwd(Act act, const float* x, const float* y, const float* W, const float* dy, float* dx,
               float* dW, float* db, float* scratch, int64_t rows, int64_t in, int64_t out,
               bool accumulate) {
  check_dense_act(act);
  // scratch (rows, out) = gradient of the pre-activation; without an
  // activation it is dy itself (scratch is untouched, as on CUDA).
  const float* dpre = dy;
  if (act != Act::None) {
    act_bwd(act, y, dy, scratch, rows * out, /*accumulate=*/false);
    dpre = scratch;
  }
  linear_bwd(x, W, dpre, dx, dW, db, rows, in, out, accumulate);
}

}  // namespace remat::cpu
