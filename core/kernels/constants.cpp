// Elementwise by a constant that repeats over the input (a scalar, or a table
// broadcast over the leading dimensions): attention's scale, a position table.
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

void check_repeat(int64_t n, int64_t cn) {
  if (cn <= 0 || n % cn != 0)
    throw std::invalid_argument("by a constant: its " + std::to_string(cn) + " values do not repeat over " +
                                std::to_string(n) + " elements");
}

}  // namespace

void const_fwd(ConstOp op, const float* x, const float* c, float* y, int64_t n, int64_t cn) {
  check_repeat(n, cn);
  for (int64_t base = 0; base < n; base += cn) {
    const float* xb = x + base;
    float* yb = y + base;
    switch (op) {
      case ConstOp::Mul: for (int64_t i = 0; i < cn; ++i) yb[i] = xb[i] * c[i]; break;
      case ConstOp::Div: for (int64_t i = 0; i < cn; ++i) yb[i] = xb[i] / c[i]; break;
      case ConstOp::Add: for (int64_t i = 0; i < cn; ++i) yb[i] = xb[i] + c[i]; break;
    }
  }
}

void const_bwd(ConstOp op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn, bool accumulate) {
  check_repeat(n, cn);
  for (int64_t base = 0; base < n; base += cn) {
    const float* g = dy + base;
    float* d = dx + base;
    for (int64_t i = 0; i < cn; ++i) {
      const float v = op == ConstOp::Mul ? g[i] * c[i] : op == ConstOp::Div ? g[i] / c[i] : g[i];
      d[i] = accumulate ? d[i] + v : v;
    }
  }
}

void const_add_param_grad(const float* dy, float* dc, int64_t n, int64_t cn) {
  check_repeat(n, cn);
  for (int64_t base = 0; base < n; base += cn)
    for (int64_t i = 0; i < cn; ++i) dc[i] += dy[base + i];
}

}  // namespace remat::cpu
