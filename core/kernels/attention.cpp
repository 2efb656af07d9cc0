// The pieces of attention: batched GEMMs of two activations (Eigen, one
// product per batch entry), softmax over the last axis, scaling by a constant
// and the causal masked fill.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/eigen.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax_row.h"

namespace remat::cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMajor>;
using Mat = Eigen::Map<RowMajor>;

// Calls f with the (rows, cols) matrix an operand stands for: the stored
// matrix, or the transpose of the stored (cols, rows) one.
template <class F>
void with_op(const float* p, int64_t rows, int64_t cols, bool trans, F f) {
  if (trans) {
    f(ConstMat(p, cols, rows).transpose());
  } else {
    f(ConstMat(p, rows, cols));
  }
}

template <class L, class R>
void gemm_into(Mat dst, const L& lhs, const R& rhs, bool accumulate) {
  if (accumulate) {
    dst.noalias() += lhs * rhs;
  } else {
    dst.noalias() = lhs * rhs;
  }
}

void check_mask(int64_t n, int64_t mask_n) {
  if (mask_n <= 0 || n % mask_n != 0) {
    throw std::invalid_argument("masked_fill: the mask's " + std::to_string(mask_n) +
                                " elements do not tile the tensor's " + std::to_string(n));
  }
}

}  // namespace

void gemm_strided(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool trans_a, bool trans_b, bool accumulate, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  for (int64_t i = 0; i < batch; ++i) {
    const Mat C(c + i * stride_c, m, n);
    with_op(a + i * stride_a, m, k, trans_a, [&](const auto& A) {
      with_op(b + i * stride_b, k, n, trans_b, [&](const auto& B) { gemm_into(C, A, B, accumulate); });
    });
  }
}

void bmm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a,
         bool trans_b, bool accumulate) {
  gemm_strided(a, b, c, batch, m, n, k, trans_a, trans_b, accumulate, m * k, k * n, m * n);
}

void bmm_bwd(const float* a, const float* b, const float* dc, float* da, float* db, int64_t batch, int64_t m,
             int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate_a, bool accumulate_b) {
  for (int64_t i = 0; i < batch; ++i) {
    const ConstMat dC(dc + i * m * n, m, n);
    if (da != nullptr) {
      // d op(a) (m, k) = dC · op(b)ᵀ; a stored transposed receives its transpose, op(b) · dCᵀ.
      with_op(b + i * k * n, k, n, trans_b, [&](const auto& B) {
        if (trans_a) {
          gemm_into(Mat(da + i * m * k, k, m), B, dC.transpose(), accumulate_a);
        } else {
          gemm_into(Mat(da + i * m * k, m, k), dC, B.transpose(), accumulate_a);
        }
      });
    }
    if (db != nullptr) {
      // d op(b) (k, n) = op(a)ᵀ · dC; b stored transposed receives dCᵀ · op(a).
      with_op(a + i * m * k, m, k, trans_a, [&](const auto& A) {
        if (trans_b) {
          gemm_into(Mat(db + i * k * n, n, k), dC.transpose(), A, accumulate_b);
        } else {
          gemm_into(Mat(db + i * k * n, k, n), A.transpose(), dC, accumulate_b);
        }
      });
    }
  }
}

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Subtracting the row max keeps exp() finite. A row that is all −inf (fully
    // masked) becomes NaN, as in PyTorch.
    (void)softmax_row(xr, yr, cols);
  }
}

void softmax_bwd(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    // dx = y · (dy − Σ dy·y)
    const float dot = static_cast<float>(dot_f64(dyr, yr, cols));
    if (accumulate) {
      for (int64_t i = 0; i < cols; ++i) dxr[i] += yr[i] * (dyr[i] - dot);
    } else {
      for (int64_t i = 0; i < cols; ++i) dxr[i] = yr[i] * (dyr[i] - dot);
    }
  }
}

void scale_fwd(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

void scale_bwd(const float* dy, float* dx, int64_t n, float alpha, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) dx[i] += alpha * dy[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = alpha * dy[i];
  }
}

void masked_fill_fwd(const float* x, const uint8_t* mask, float* y, int64_t n, int64_t mask_n, float value) {
  check_mask(n, mask_n);
  for (int64_t base = 0; base < n; base += mask_n) {
    for (int64_t i = 0; i < mask_n; ++i) y[base + i] = mask[i] != 0 ? value : x[base + i];
  }
}

void masked_fill_bwd(const float* dy, const uint8_t* mask, float* dx, int64_t n, int64_t mask_n, bool accumulate) {
  check_mask(n, mask_n);
  for (int64_t base = 0; base < n; base += mask_n) {
    for (int64_t i = 0; i < mask_n; ++i) {
      const float v = mask[i] != 0 ? 0.0f : dy[base + i];
      dx[base + i] = accumulate ? dx[base + i] + v : v;
    }
  }
}

}  // namespace remat::cpu
