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

// The loops: the operation chosen once per call, not per element, and a
// scalar constant (cn == 1: attention's 1/sqrt(d), a norm's eps) as one value
// over the whole tensor rather than n rows of one element.
template <class V>
void fwd_rows(const float* x, const float* c, float* y, int64_t n, int64_t cn, V v) {
  if (cn == 1) {
    const float c0 = c[0];
    for (int64_t i = 0; i < n; ++i) y[i] = v(x[i], c0);
    return;
  }
  for (int64_t base = 0; base < n; base += cn) {
    const float* xb = x + base;
    float* yb = y + base;
    for (int64_t i = 0; i < cn; ++i) yb[i] = v(xb[i], c[i]);
  }
}

template <class V>
void bwd_rows(const float* dy, const float* c, float* dx, int64_t n, int64_t cn, bool accumulate, V v) {
  if (cn == 1) {
    const float c0 = c[0];
    if (accumulate) {
      for (int64_t i = 0; i < n; ++i) dx[i] = dx[i] + v(dy[i], c0);
    } else {
      for (int64_t i = 0; i < n; ++i) dx[i] = v(dy[i], c0);
    }
    return;
  }
  for (int64_t base = 0; base < n; base += cn) {
    const float* g = dy + base;
    float* d = dx + base;
    if (accumulate) {
      for (int64_t i = 0; i < cn; ++i) d[i] = d[i] + v(g[i], c[i]);
    } else {
      for (int64_t i = 0; i < cn; ++i) d[i] = v(g[i], c[i]);
    }
  }
}

}  // namespace

void const_fwd(ConstOp op, const float* x, const float* c, float* y, int64_t n, int64_t cn) {
  check_repeat(n, cn);
  switch (op) {
    case ConstOp::Mul: return fwd_rows(x, c, y, n, cn, [](float a, float b) { return a * b; });
    case ConstOp::Div: return fwd_rows(x, c, y, n, cn, [](float a, float b) { return a / b; });
    case ConstOp::Add: return fwd_rows(x, c, y, n, cn, [](float a, float b) { return a + b; });
  }
}

void const_bwd(ConstOp op, const float* dy, const float* c, float* dx, int64_t n, int64_t cn, bool accumulate) {
  check_repeat(n, cn);
  switch (op) {
    case ConstOp::Mul: return bwd_rows(dy, c, dx, n, cn, accumulate, [](float g, float b) { return g * b; });
    case ConstOp::Div: return bwd_rows(dy, c, dx, n, cn, accumulate, [](float g, float b) { return g / b; });
    case ConstOp::Add: return bwd_rows(dy, c, dx, n, cn, accumulate, [](float g, float) { return g; });
  }
}

void const_add_param_grad(const float* dy, float* dc, int64_t n, int64_t cn) {
  check_repeat(n, cn);
  if (cn == 1) {  // the same float additions in the same order, in a register
    float s = dc[0];
    for (int64_t i = 0; i < n; ++i) s += dy[i];
    dc[0] = s;
    return;
  }
  for (int64_t base = 0; base < n; base += cn)
    for (int64_t i = 0; i < cn; ++i) dc[i] += dy[base + i];
}

}  // namespace remat::cpu
