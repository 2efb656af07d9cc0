#include "core/exec/cpu_mixed.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/base/errors.h"
#include "core/exec/mixed_call.h"
#include "core/kernels/convert.h"
#include "core/kernels/cpu_kernels.h"
#include "core/model/op_layout.h"

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
    if (s.io.active) return io_call(c, false);
    cpu_forward(s, c);
  }
  void backward(OpCall& c) {
    cpu_dense_input(s, c, true);
    if (s.lowp.active()) return lowp_call(c, true);
    if (s.io.active) return io_call(c, true);
    cpu_backward(s, c);
  }
  GemmMode gemm_mode() const { return s.gemm_mode; }
  GemmMode conv_mode() const { return s.conv_mode; }
  void set_lowp(const LowpOperands& o) { s.lowp = o; }
  PointwiseMode pointwise_mode() const { return s.pointwise_mode; }
  void set_io(const IoOperands& o) { s.io = o; }

  // The CUDA backend's lowp_io kernels on the CPU (CpuBackend::set_pointwise_mode).
  // As on CUDA, the mixed call takes no f32 copy for such a call: its tables
  // hold the stored tensors, and the kernel reads only what is handed over
  // (IoOperands). So the f32 kernel runs here on buffers of its own: each
  // 16-bit tensor handed over widened into one (a strided input over its
  // reach), any other 16-bit one NaN (a kernel reading it gives a wrong
  // result), an f32 one handed over must be the very tensor in the table;
  // each result goes into the tensor handed over as the CUDA kernels store
  // it: rounded once to its dtype, or added to what it holds (the f32 sum
  // rounded once). A gradient the kernel computes that is not handed over
  // would be lost: an error.
  static constexpr bool io_kernels_read_only_handed = true;
  void io_call(OpCall& c, bool backward) {
    const IoOperands& o = s.io;
    const TensorTable& t = c.table();
    std::vector<void*> act(t.act.begin(), t.act.end()), grad(t.grad.begin(), t.grad.end());
    std::vector<std::vector<float>> bufs;
    const auto buffer = [&](int64_t n) {
      bufs.emplace_back(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
      return bufs.back().data();
    };
    // What the kernel reads of tensor u: `handed` widened, or NaN where a 16-bit one is not handed over.
    const auto read = [&](std::vector<void*>& table, int u, const IoTensor& handed, int64_t n, const char* what) {
      const auto ui = static_cast<std::size_t>(u);
      if (!table[ui]) return;
      if (handed.p && !is_low_precision(handed.dtype)) {
        if (handed.p != table[ui])
          throw InternalError(op_label(c.model, c.v) + ": the f32 " + what + " handed over is not the one in the table");
        return;
      }
      if (!handed.p && !is_low_precision(c.model.op(c.model.op(u).storage).dtype)) return;  // f32: read as is
      float* f = buffer(n);
      if (handed.p) remat::widen(handed.dtype, handed.p, f, n);
      table[ui] = f;
    };
    const std::size_t inputs = c.op.inputs.size();
    for (std::size_t k = 0; k < inputs; ++k) read(act, c.op.inputs[k], o.in[k], reach(c.in_op(k)), "input");
    const auto vi = static_cast<std::size_t>(c.v);
    if (!backward) {
      // A loss's A(v), the scalar, the mixed call writes as on the widening path (its f32 scratch).
      float* y = is_loss(c.op.kind) ? static_cast<float*>(act[vi]) : buffer(c.op.numel());
      act[vi] = y;
      const TensorTable local{act, grad, t.aux};
      OpCall lc(c.model, c.v, local);
      cpu_forward(s, lc);
      if (!is_loss(c.op.kind)) io_write(c, o.out, y, c.op.numel(), "output");
      ++s.io_calls;
      return;
    }
    read(act, c.v, o.out, c.op.numel(), "output");
    read(grad, c.v, o.dy, c.op.numel(), "G");
    // The CUDA kernels store each gradient once, as its tensor handed over
    // says (stored or added); none sums two terms of one input in the call
    // (the f32 kernels' accumulate, set for an input given twice).
    std::vector<float*> dx(inputs, nullptr);
    for (std::size_t k = 0; k < inputs; ++k) {
      if (!c.dx(k)) continue;
      if (c.acc(k))
        throw InternalError(op_label(c.model, c.v) + ": input gradient " + std::to_string(k) +
                            " summed in the call, which a 16-bit kernel does not do");
      if (!o.dx[k].p)
        throw InternalError(op_label(c.model, c.v) + ": input gradient " + std::to_string(k) + " not handed over");
      dx[k] = buffer(c.in_op(k).numel());
      grad[static_cast<std::size_t>(c.op.inputs[k])] = dx[k];
    }
    const TensorTable local{act, grad, t.aux};
    const std::vector<uint8_t> none(inputs, 0);
    OpCall lc(c.model, c.v, local, none);
    cpu_backward(s, lc);
    for (std::size_t k = 0; k < inputs; ++k)
      if (dx[k]) io_write(c, o.dx[k], dx[k], c.in_op(k).numel(), "input gradient");
    ++s.io_calls;
  }
  // The elements from a tensor's first to its last, through its strides (a
  // strided view, which the pointwise family reads as stored, spans more than
  // its numel(); they lie in its storage, which the widened copy covers).
  static int64_t reach(const Op& x) {
    if (x.numel() == 0) return 0;
    const std::vector<int64_t> st = layout_of(x);
    int64_t last = 0;
    for (std::size_t d = 0; d < x.shape.size(); ++d) last += (x.shape[d] - 1) * st[d];
    return last + 1;
  }
  void io_write(const OpCall& c, const IoTensor& t, const float* f32, int64_t n, const char* what) const {
    if (t.dtype == DType::F32 && t.p == f32 && !t.add) return;  // the kernel wrote the tensor itself (or none: a loss's A)
    if (!t.p) throw InternalError(op_label(c.model, c.v) + ": no " + what + " handed over");
    std::vector<float> r(f32, f32 + n);
    remat::round_to(t.dtype, r.data(), n);
    if (t.add) remat::add_stored(t.dtype, t.p, r.data(), n);
    else remat::narrow(t.dtype, r.data(), t.p, n);
  }
  // What the mixed call leaves unwidened for a 16-bit product: NaN here, so
  // that an f32 kernel reading it cannot go unnoticed.
  void poison(float* x, int64_t n) { std::fill(x, x + n, std::numeric_limits<float>::quiet_NaN()); }

  // The CUDA backend's 16-bit operands on the CPU (CpuBackend::set_gemm_mode):
  // the f32 kernels read x and W widened from the codes handed over, as the
  // tensor cores read them; G(v)'s codes must widen to the G the kernel reads.
  void lowp_call(OpCall& c, bool backward) {
    if (c.op.kind == OpKind::MatMul) return lowp_matmul(c, backward);
    if (c.op.kind == OpKind::Conv) return lowp_conv(c, backward);
    if (backward) expect_codes(c, s.lowp.dy, c.dy(), c.op.numel(), "G");  // widened: a bias gradient sums it
    const Op& x = c.in_op(0);
    const int64_t nx = x.numel(), nw = x.cols() * c.op.cols();
    std::vector<float> x32(static_cast<std::size_t>(nx)), w32(static_cast<std::size_t>(nw));
    remat::widen(s.lowp.dtype, s.lowp.x, x32.data(), nx);
    remat::widen(s.lowp.dtype, s.lowp.w, w32.data(), nw);
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
  // A Conv as the CUDA backend runs it on cuDNN's 16-bit path: the f32
  // convolution of x, W and G(v) widened from the codes handed over (its own
  // f32 buffers are NaN: unwidened), its results narrowed to where cuDNN
  // writes them (the forward's output to A(v); the input gradient to
  // lowp.dx; the weight gradient to a staging buffer, the backend's on the
  // GPU) and widened from there into the f32 buffers the call goes on with.
  // The bias is added to, and its gradient summed from, f32 values, as the
  // GPU's epilogue does. Only the sums differ on the GPU (cuDNN's order, and
  // its rounding to the dtype before the bias): this checks the plumbing.
  void lowp_conv(OpCall& c, bool backward) {
    const cpu::ConvGeom g = conv_geom(c.model, c.v);
    const bool bias = c.op.attrs->bias;
    const DType t = s.lowp.dtype;
    const int64_t nx = c.in_op(0).numel(), nw = g.k * (g.c / g.groups) * g.r * g.s, ny = c.op.numel();
    std::vector<float> x32(static_cast<std::size_t>(nx)), w32(static_cast<std::size_t>(nw));
    remat::widen(t, s.lowp.x, x32.data(), nx);
    remat::widen(t, s.lowp.w, w32.data(), nw);
    if (!backward) {
      std::vector<float> y(static_cast<std::size_t>(ny));
      cpu::conv2d_fwd(g, x32.data(), w32.data(), nullptr, y.data(), s.scratch[kConvColumns]);
      remat::narrow(t, y.data(), s.lowp.y, ny);  // cuDNN's 16-bit output in A(v)
      if (s.lowp.y_final) {  // the result as stored: the f32 output stays unwritten (NaN: never read)
        poison(c.out(), ny);
        ++s.lowp_conv_calls;
        return;
      }
      remat::widen(t, s.lowp.y, c.out(), ny);  // widened for the epilogue
      if (bias) {
        const float* b = s.param(c.v, 1);
        float* out = c.out();
        const int64_t hw = g.oh() * g.ow();
        for (int64_t i = 0; i < ny; ++i) out[i] += b[(i / hw) % g.k];
      }
      ++s.lowp_conv_calls;
      return;
    }
    if (bias) expect_codes(c, s.lowp.dy, c.dy(), ny, "G");  // widened: the bias gradient sums it
    std::vector<float> dy(static_cast<std::size_t>(ny)), dw(static_cast<std::size_t>(nw), 0.0f);
    remat::widen(t, s.lowp.dy, dy.data(), ny);
    float* dx = c.dx(0);
    if (dx && (!s.lowp.dx || c.acc(0)))
      throw InternalError(op_label(c.model, c.v) + ": a 16-bit input gradient needs its staging and no accumulation");
    std::vector<float> dx32(dx ? static_cast<std::size_t>(nx) : 0);
    float* db = bias ? s.param_grad(c.v, 1) : nullptr;
    cpu::conv2d_bwd(g, x32.data(), w32.data(), dy.data(), dx ? dx32.data() : nullptr, dw.data(), db, false,
                    s.scratch[kConvColumns]);
    if (dx) {
      remat::narrow(t, dx32.data(), s.lowp.dx, nx);
      remat::widen(t, s.lowp.dx, dx, nx);
    }
    // The weight gradient is set, not added (the mixed call's zeroed scratch), from its 16-bit codes.
    std::vector<uint16_t> dw16(static_cast<std::size_t>(nw));
    remat::narrow(t, dw.data(), dw16.data(), nw);
    remat::widen(t, dw16.data(), s.param_grad(c.v, 0), nw);
    ++s.lowp_conv_calls;
  }
  // The codes handed over must widen to the f32 values the kernel reads.
  void expect_codes(const OpCall& c, const void* codes, const float* f32, int64_t n, const char* what) const {
    std::vector<float> w(static_cast<std::size_t>(n));
    remat::widen(s.lowp.dtype, codes, w.data(), n);
    if (n > 0 && std::memcmp(w.data(), f32, 4 * w.size()) != 0)
      throw InternalError(op_label(c.model, c.v) + ": the 16-bit " + what + " handed over is not the one the kernel reads");
  }
  // A MatMul's operands as the tensor cores read them: the f32 buffers its
  // kernel reads (the call's own scratch, left unwidened: NaN) are written
  // from the codes handed over: the operands read in place, and in the
  // backward the copies in aux(v) (the forward's kernel makes them from the
  // widened inputs; on the GPU it narrows them to those places before the
  // product) and G(v).
  void lowp_matmul(OpCall& c, bool backward) {
    const MatmulDims d = matmul_dims(c.model, c.v);
    for (std::size_t k = 0; k < 2; ++k) {
      const bool in_aux = k == 0 ? d.aux_a : d.aux_b;
      if (in_aux && !backward) continue;
      const std::vector<int64_t>& of = k == 0 ? d.a_of : d.b_of;
      const int64_t size = k == 0 ? d.m * d.k : d.k * d.n;
      const int64_t n = in_aux ? d.batch * size : (of.empty() ? 0 : *std::max_element(of.begin(), of.end()) + 1) * size;
      float* f32 = in_aux ? c.aux() + (k == 1 && d.aux_a ? d.batch * d.m * d.k : 0) : const_cast<float*>(c.in(k));
      remat::widen(s.lowp.dtype, k == 0 ? s.lowp.x : s.lowp.x1, f32, n);
    }
    if (backward) remat::widen(s.lowp.dtype, s.lowp.dy, const_cast<float*>(c.dy()), c.op.numel());
    if (backward) cpu_backward(s, c);
    else cpu_forward(s, c);
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
