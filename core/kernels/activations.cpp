// Elementwise activations. ReLU, Tanh and Sigmoid differentiate from their
// output so the op only has to keep y; GELU and SiLU need their input
// (cpu_kernels.h), as PyTorch's derivatives do.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// Exact GELU as torch.nn.GELU() (approximate='none'), not the tanh approximation,
// so that exported PyTorch models give the same numbers.
float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }

// d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
float gelu_grad(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
  return cdf + x * pdf;
}

// The forms PyTorch's CPU kernels evaluate: 1/(1 + e^−x) and x/(1 + e^−x)
// (e^−x overflows to inf for very negative x, giving exactly 0).
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }

// d/dx [x·σ(x)] = σ(x)·(1 + x·(1 − σ(x))).
float silu_grad(float x) {
  const float sig = sigmoid(x);
  return sig * (1.0f + x * (1.0f - sig));
}

[[noreturn]] void bad_act(Act act) {
  throw std::invalid_argument("unknown activation " + std::to_string(static_cast<int>(act)));
}

template <class Grad>
void write_grad(const float* v, const float* dy, float* dx, int64_t n, bool accumulate, Grad grad) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) dx[i] += grad(v[i], dy[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = grad(v[i], dy[i]);
  }
}

}  // namespace

// x and y may alias: Dense applies the activation in place.
void act_fwd(Act act, const float* x, float* y, int64_t n) {
  switch (act) {
    case Act::None:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    case Act::ReLU:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      return;
    case Act::Tanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      return;
    case Act::GELU:
      for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
      return;
    case Act::Sigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = sigmoid(x[i]);
      return;
    case Act::SiLU:
      for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
      return;
  }
  bad_act(act);
}

void act_bwd(Act act, const float* x_or_y, const float* dy, float* dx, int64_t n, bool accumulate) {
  switch (act) {
    case Act::None:
      write_grad(x_or_y, dy, dx, n, accumulate, [](float, float g) { return g; });
      return;
    case Act::ReLU:  // reads y: y > 0 exactly where x > 0
      write_grad(x_or_y, dy, dx, n, accumulate,
                 [](float y, float g) { return y > 0.0f ? g : 0.0f; });
      return;
    case Act::Tanh:  // reads y: tanh' = 1 - y²
      write_grad(x_or_y, dy, dx, n, accumulate,
                 [](float y, float g) { return g * (1.0f - y * y); });
      return;
    case Act::GELU:  // reads x
      write_grad(x_or_y, dy, dx, n, accumulate, [](float x, float g) { return g * gelu_grad(x); });
      return;
    case Act::Sigmoid:  // reads y: σ' = y·(1 − y)
      write_grad(x_or_y, dy, dx, n, accumulate,
                 [](float y, float g) { return g * y * (1.0f - y); });
      return;
    case Act::SiLU:  // reads x
      write_grad(x_or_y, dy, dx, n, accumulate, [](float x, float g) { return g * silu_grad(x); });
      return;
  }
  bad_act(act);
}

}  // namespace remat::cpu
