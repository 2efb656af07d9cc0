// The pointwise family: one line per function, each with its forward, the
// derivative with respect to each operand, and what that derivative reads
// (PyTorch's autograd formula in derivatives.yaml, so that what the backward
// keeps is what PyTorch keeps: mul reads the other operand, exp its result,
// neg nothing). The rules (core/model/op_rules.cpp) derive an op's saved set from
// the `reads` columns; the CPU (pointwise.cpp) and CUDA (gpu/kernels/
// pointwise.cu) kernels evaluate the expressions, each in one loop over a
// broadcast index. Host and device compile the same code.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define REMAT_PW_HD __host__ __device__ __forceinline__
#else
#define REMAT_PW_HD inline
#endif

namespace remat::pw {

// What a derivative reads: operands 0, 1, 2 and the op's own output.
enum Reads : uint8_t { kNone = 0, kA = 1, kB = 2, kC = 4, kY = 8 };

// The math functions by overload: float in the kernels, double in the
// tests' references (std::, which CUDA's device code has too).
using std::erf;
using std::exp;
using std::fabs;
using std::fmax;
using std::fmin;
using std::log;
using std::log1p;
using std::pow;
using std::sqrt;
using std::tanh;
using std::sin;
using std::cos;

// Function helpers (the forms PyTorch's CPU kernels evaluate where there is a choice).
template <class T> REMAT_PW_HD T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }
template <class T> REMAT_PW_HD T gelu(T x) { return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440))); }
template <class T> REMAT_PW_HD T gelu_grad(T x) {
  return T(0.5) * (T(1) + erf(x * T(0.70710678118654752440))) + x * T(0.39894228040143267794) * exp(T(-0.5) * x * x);
}
template <class T> REMAT_PW_HD T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}
// softplus with beta and threshold (torch.nn.functional.softplus): linear above the threshold.
template <class T> REMAT_PW_HD T softplus(T x, T beta, T threshold) {
  return x * beta > threshold ? x : log1p(exp(x * beta)) / beta;
}
template <class T> REMAT_PW_HD T softplus_grad(T x, T beta, T threshold) {
  if (x * beta > threshold) return T(1);
  const T z = exp(x * beta);
  return z / (z + T(1));
}
// mish(x) = x·tanh(softplus(x)); its derivative as PyTorch's mish_backward.
template <class T> REMAT_PW_HD T mish_grad(T x) {
  const T t = tanh(log1p(exp(x)));
  return t + x * sigmoid(x) * (T(1) - t * t);
}
template <class T> REMAT_PW_HD T hardsigmoid(T x) { return fmin(fmax(x + T(3), T(0)), T(6)) / T(6); }
template <class T> REMAT_PW_HD T nan_or(T a, T b, T v) { return (a != a) ? a : (b != b) ? b : v; }
// maximum/minimum propagate NaN (torch.maximum); their gradient splits a tie
// in half (PyTorch's formula).
template <class T> REMAT_PW_HD T max_grad(T self, T other, T g) { return self > other ? g : self == other ? g / T(2) : T(0); }
template <class T> REMAT_PW_HD T min_grad(T self, T other, T g) { return self < other ? g : self == other ? g / T(2) : T(0); }
template <class T> REMAT_PW_HD T sign(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0); }
// pow's derivatives (pow_backward_self, pow_backward_exponent).
template <class T> REMAT_PW_HD T pow_grad_self(T a, T b, T g) { return b == T(0) ? T(0) : g * b * pow(a, b - T(1)); }
template <class T> REMAT_PW_HD T pow_grad_exponent(T a, T b, T y, T g) {
  return (a == T(0) && b >= T(0)) ? T(0) : g * y * log(a);
}

// X(Name, "name", arity, reads of d/da, d/db, d/dc, forward FLOPs and
// backward FLOPs per element, forward, d/da · g, d/db · g, d/dc · g).
// In the expressions: operands a, b, c, output y, incoming gradient g,
// attributes p and q (leaky_relu's slope, elu's alpha, softplus's beta and
// threshold, clamp's min and max). An operand a derivative does not read is
// 0 there. ReLU..SiLU are the activations that also have kinds of their own.
#define REMAT_POINTWISE_FNS(X)                                                                                        \
  X(Neg, "neg", 1, kNone, kNone, kNone, 1, 1, -a, -g, T(0), T(0))                                                     \
  X(Exp, "exp", 1, kY, kNone, kNone, 8, 1, exp(a), g * y, T(0), T(0))                                                 \
  X(Log, "log", 1, kA, kNone, kNone, 8, 1, log(a), g / a, T(0), T(0))                                                 \
  X(Sqrt, "sqrt", 1, kY, kNone, kNone, 4, 2, sqrt(a), g / (2.0f * y), T(0), T(0))                                     \
  X(Rsqrt, "rsqrt", 1, kY, kNone, kNone, 5, 4, T(1) / sqrt(a), -0.5f * g * (y * y * y), T(0), T(0))                   \
  X(Reciprocal, "reciprocal", 1, kY, kNone, kNone, 1, 3, 1.0f / a, -g * (y * y), T(0), T(0))                          \
  X(Abs, "abs", 1, kA, kNone, kNone, 1, 2, fabs(a), g * sign(a), T(0), T(0))                                          \
  X(Sin, "sin", 1, kA, kNone, kNone, 8, 9, sin(a), g * cos(a), T(0), T(0))                                            \
  X(Cos, "cos", 1, kA, kNone, kNone, 8, 9, cos(a), -g * sin(a), T(0), T(0))                                           \
  X(Erf, "erf", 1, kA, kNone, kNone, 10, 10, erf(a), g * T(1.12837916709551257390) * exp(-a * a), T(0), T(0))         \
  X(Hardswish, "hardswish", 1, kA, kNone, kNone, 4, 3, a * hardsigmoid(a),                                            \
    a < -3.0f ? T(0) : a <= 3.0f ? g * (a / 3.0f + 0.5f) : g, T(0), T(0))                                             \
  X(Hardsigmoid, "hardsigmoid", 1, kA, kNone, kNone, 3, 2, hardsigmoid(a),                                            \
    (a > -3.0f && a < 3.0f) ? g / 6.0f : T(0), T(0), T(0))                                                            \
  X(LeakyReLU, "leaky_relu", 1, kA, kNone, kNone, 1, 1, a > T(0) ? a : a * p, a > T(0) ? g : g * p, T(0), T(0))       \
  X(ELU, "elu", 1, kA, kNone, kNone, 9, 9, a > T(0) ? a : p * (exp(a) - 1.0f),                                        \
    a > T(0) ? g : g * p * exp(a), T(0), T(0))                                                                        \
  X(Softplus, "softplus", 1, kA, kNone, kNone, 12, 12, softplus(a, p, q), g * softplus_grad(a, p, q), T(0), T(0))     \
  X(Mish, "mish", 1, kA, kNone, kNone, 20, 24, a * tanh(log1p(exp(a))), g * mish_grad(a), T(0), T(0))                 \
  X(Clamp, "clamp", 1, kA, kNone, kNone, 2, 2, nan_or(a, a, fmin(fmax(a, p), q)),                                     \
    (a >= p && a <= q) ? g : T(0), T(0), T(0))                                                                        \
  X(ReLU, "relu", 1, kY, kNone, kNone, 1, 2, a > T(0) ? a : T(0), y > T(0) ? g : T(0), T(0), T(0))                    \
  X(Tanh, "tanh", 1, kY, kNone, kNone, 1, 2, tanh(a), g * (1.0f - y * y), T(0), T(0))                                 \
  X(Sigmoid, "sigmoid", 1, kY, kNone, kNone, 4, 3, sigmoid(a), g * y * (1.0f - y), T(0), T(0))                        \
  X(GELU, "gelu", 1, kA, kNone, kNone, 8, 12, gelu(a), g * gelu_grad(a), T(0), T(0))                                  \
  X(SiLU, "silu", 1, kA, kNone, kNone, 5, 8, a / (T(1) + exp(-a)), g * silu_grad(a), T(0), T(0))                      \
  X(Cast, "cast", 1, kNone, kNone, kNone, 1, 1, a, g, T(0), T(0))                                                     \
  X(Add, "add", 2, kNone, kNone, kNone, 1, 1, a + b, g, g, T(0))                                                      \
  X(Sub, "sub", 2, kNone, kNone, kNone, 1, 1, a - b, g, -g, T(0))                                                     \
  X(Mul, "mul", 2, kB, kA, kNone, 1, 2, a * b, g * b, g * a, T(0))                                                    \
  X(Div, "div", 2, kB, kA | kB, kNone, 1, 3, a / b, g / b, -g * ((a / b) / b), T(0))                                  \
  X(Maximum, "maximum", 2, kA | kB, kA | kB, kNone, 1, 2, nan_or(a, b, a > b ? a : b), max_grad(a, b, g),             \
    max_grad(b, a, g), T(0))                                                                                          \
  X(Minimum, "minimum", 2, kA | kB, kA | kB, kNone, 1, 2, nan_or(a, b, a < b ? a : b), min_grad(a, b, g),             \
    min_grad(b, a, g), T(0))                                                                                          \
  X(Pow, "pow", 2, kA | kB, kA | kB | kY, kNone, 10, 20, pow(a, b), pow_grad_self(a, b, g),                           \
    pow_grad_exponent(a, b, y, g), T(0))                                                                              \
  X(Where, "where", 3, kNone, kA, kA, 1, 2, a != T(0) ? b : c, T(0), a != T(0) ? g : T(0), a != T(0) ? T(0) : g)

enum class Fn : uint8_t {
#define REMAT_PW_ENUM(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2) Name,
  REMAT_POINTWISE_FNS(REMAT_PW_ENUM)
#undef REMAT_PW_ENUM
};

struct FnInfo {
  const char* name;
  int arity;
  uint8_t reads[3];  // what the derivative with respect to operand k reads
  int fwd_flops, bwd_flops;
};

constexpr FnInfo kFns[] = {
#define REMAT_PW_INFO(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2) {name, arity, {r0, r1, r2}, ff, bf},
    REMAT_POINTWISE_FNS(REMAT_PW_INFO)
#undef REMAT_PW_INFO
};
constexpr int kFnCount = static_cast<int>(sizeof(kFns) / sizeof(kFns[0]));

inline const FnInfo& info(Fn f) { return kFns[static_cast<int>(f)]; }

// The forward of `f` at one element, in T (float in the kernels). Unused operands are ignored.
template <class T>
REMAT_PW_HD T forward(Fn f, T a, T b, T c, T p, T q) {
  (void)b, (void)c, (void)p, (void)q;
  switch (f) {
#define REMAT_PW_FWD(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2) \
  case Fn::Name: return fwd;
    REMAT_POINTWISE_FNS(REMAT_PW_FWD)
#undef REMAT_PW_FWD
  }
  return T(0);
}

// g times the derivative of `f` with respect to operand k, at one element.
template <class T>
REMAT_PW_HD T backward(Fn f, int k, T a, T b, T c, T y, T g, T p, T q) {
  (void)a, (void)b, (void)c, (void)y, (void)p, (void)q;
  switch (f) {
#define REMAT_PW_BWD(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2) \
  case Fn::Name: return k == 0 ? (g0) : k == 1 ? (g1) : (g2);
    REMAT_POINTWISE_FNS(REMAT_PW_BWD)
#undef REMAT_PW_BWD
  }
  return T(0);
}

// How many of the attributes p, q `f` takes (0 to 2), with PyTorch's
// defaults: leaky_relu's slope 0.01, elu's alpha 1, softplus's beta 1 and
// threshold 20, clamp's min -inf and max +inf (no bound).
inline int attr_defaults(Fn f, float& p, float& q) {
  switch (f) {
    case Fn::LeakyReLU: p = 0.01f; return 1;
    case Fn::ELU: p = 1.0f; return 1;
    case Fn::Softplus: p = 1.0f, q = 20.0f; return 2;
    case Fn::Clamp: p = -INFINITY, q = INFINITY; return 2;
    default: return 0;
  }
}

// Reductions over a set of axes (the Reduce kind): sum, mean, amax. amax's
// backward reads its input and its result (PyTorch's amax keeps both) and
// splits the gradient evenly among the maxima; sum and mean read nothing.
enum class ReduceFn : uint8_t { Sum, Mean, Amax };
constexpr const char* kReduceNames[] = {"sum", "mean", "amax"};

}  // namespace remat::pw
