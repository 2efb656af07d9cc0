#include "core/exec/cpu_mixed.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/base/errors.h"
#include "core/exec/mixed_call.h"
#include "core/kernels/convert.h"

namespace remat {
namespace {

// x's values as dtype d stores them (f32: unchanged).
void round_to(DType d, float* x, int64_t n) {
  if (d == DType::BF16) cpu::round_bf16(x, n);
  else if (d == DType::F16) cpu::round_f16(x, n);
}

void widen(DType d, const void* src, float* dst, int64_t n) {
  if (d == DType::BF16) cpu::bf16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  else if (d == DType::F16) cpu::f16_to_f32(static_cast<const uint16_t*>(src), dst, n);
  else std::memcpy(dst, src, 4 * static_cast<std::size_t>(n));
}

void narrow(DType d, const float* src, void* dst, int64_t n) {
  if (d == DType::BF16) cpu::f32_to_bf16(src, static_cast<uint16_t*>(dst), n);
  else if (d == DType::F16) cpu::f32_to_f16(src, static_cast<uint16_t*>(dst), n);
  else std::memcpy(dst, src, 4 * static_cast<std::size_t>(n));
}

// g = g + c in dtype d: the sum in f32, rounded once (c is already in d).
void add_stored(DType d, void* g, const float* c, int64_t n) {
  if (!is_low_precision(d)) {
    auto* f = static_cast<float*>(g);
    for (int64_t i = 0; i < n; ++i) f[i] += c[i];
    return;
  }
  auto* h = static_cast<uint16_t*>(g);
  if (d == DType::BF16)
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::bf16_bits(cpu::bf16_value(h[i]) + c[i]);
  else
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::f16_bits(cpu::f16_value(h[i]) + c[i]);
}

// The CPU's memory and kernels for mixed::WidenedCall.
struct CpuDev {
  using State = CpuOpState;
  CpuOpState& s;
  CpuOpState& state() { return s; }
  void widen(DType d, const void* src, float* dst, int64_t n) { remat::widen(d, src, dst, n); }
  void narrow(DType d, const float* src, void* dst, int64_t n) { remat::narrow(d, src, dst, n); }
  void round_to(DType d, float* x, int64_t n) { remat::round_to(d, x, n); }
  void add_stored(DType d, void* g, const float* c, int64_t n) { remat::add_stored(d, g, c, n); }
  void scale(float* x, int64_t n, float f) {
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  }
  void add(float* dst, const float* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void copy(float* dst, const float* src, int64_t n) { std::memcpy(dst, src, 4 * static_cast<std::size_t>(n)); }
  void zero(float* x, int64_t n) { std::fill(x, x + n, 0.0f); }
  void write_loss(float* dst) { dst[0] = s.loss; }
  void forward(OpCall& c) {
    cpu_dense_input(s, c, false);
    if (s.lowp.active()) return lowp_call(c, false);
    cpu_forward(s, c);
  }
  void backward(OpCall& c) {
    cpu_dense_input(s, c, true);
    if (s.lowp.active()) return lowp_call(c, true);
    cpu_backward(s, c);
  }
  GemmMode gemm_mode() const { return s.gemm_mode; }
  void set_lowp(const LowpOperands& o) { s.lowp = o; }

  // The CUDA backend's 16-bit operands on the CPU (CpuBackend::set_gemm_mode):
  // the f32 kernels read x and W widened from the codes handed over, as the
  // tensor cores read them; G(v)'s codes must widen to the G the kernel reads.
  void lowp_call(OpCall& c, bool backward) {
    const Op& x = c.in_op(0);
    const int64_t nx = x.numel(), nw = x.cols() * c.op.cols();
    std::vector<float> x32(static_cast<std::size_t>(nx)), w32(static_cast<std::size_t>(nw));
    remat::widen(s.lowp.dtype, s.lowp.x, x32.data(), nx);
    remat::widen(s.lowp.dtype, s.lowp.w, w32.data(), nw);
    if (backward) {
      std::vector<float> dy32(static_cast<std::size_t>(c.op.numel()));
      remat::widen(s.lowp.dtype, s.lowp.dy, dy32.data(), c.op.numel());
      if (std::memcmp(dy32.data(), c.dy(), 4 * dy32.size()) != 0)
        throw InternalError(op_label(c.model, c.v) + ": the 16-bit G handed over is not the G the kernel reads");
    }
    c.set_dense_in0(x32.data());
    float*& w = s.params[s.param_slots.index(c.v, 0)];
    float* const was = std::exchange(w, w32.data());
    try {
      if (backward) cpu_backward(s, c);
      else cpu_forward(s, c);
    } catch (...) {
      w = was;
      throw;
    }
    w = was;
    ++s.lowp_calls;
  }
};

}  // namespace

bool runs_mixed(const Model& model, int v) {
  const Op& op = model.op(v);
  if (is_low_precision(op.dtype) || is_low_precision(model.op(op.storage).dtype)) return true;
  return std::any_of(op.inputs.begin(), op.inputs.end(),
                     [&](int u) { return is_low_precision(model.op(model.op(u).storage).dtype); });
}

void mixed_forward(CpuOpState& s, const Model& model, int v, const TensorTable& t, MixedScratch& scratch) {
  CpuDev dev{s};
  mixed::forward(dev, model, v, t, scratch);
}

bool uses_f16(const Model& model) {
  return std::any_of(model.ops().begin(), model.ops().end(), [](const Op& op) { return op.dtype == DType::F16; });
}

void mixed_backward(CpuOpState& s, const Model& model, int v, const TensorTable& t,
                    std::span<const uint8_t> accumulate, MixedScratch& scratch, float seed) {
  CpuDev dev{s};
  mixed::backward(dev, model, v, t, accumulate, scratch, seed);
}

}  // namespace remat
