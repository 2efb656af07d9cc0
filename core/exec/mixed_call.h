// The widening call of mixed precision (docs/memory-model.md#mixed-precision-autocast),
// written once for both backends: an op that reads or writes a bf16/f16
// tensor runs its f32 kernels on f32 copies, as core/exec/cpu_mixed.h says.
// `Dev` supplies the memory (host or device) and the kernels:
//   using State = ...;  State& state();  // params, grads, param_slots
//   void widen(DType, const void* src, float* dst, int64_t n);    // 16-bit (or f32) to f32
//   void narrow(DType, const float* src, void* dst, int64_t n);   // f32 to the dtype, nearest even
//   void round_to(DType, float* x, int64_t n);                    // in place; f32: nothing
//   void add_stored(DType, void* g, const float* c, int64_t n);   // g += c in the dtype, rounded once
//   void scale(float* x, int64_t n, float s);  void add(float* dst, const float* src, int64_t n);
//   void copy(float* dst, const float* src, int64_t n);  void zero(float* x, int64_t n);
//   void write_loss(float* dst);                                  // the loss value into dst[0]
//   void forward(OpCall&);  void backward(OpCall&);               // the f32 kernels (dense inputs made)
// and, optionally (the CUDA backend's; core/exec/gemm_path.h):
//   GemmMode gemm_mode();  void set_lowp(const LowpOperands&);    // 16-bit operands for the next call's GEMMs
//   PointwiseMode pointwise_mode();  void set_io(const IoOperands&); // tensors as stored, for the next call
//                                                                  // (core/exec/pointwise_path.h)
//   GemmMode conv_mode();                                         // the same for its convolutions (lowp_conv)
//   bool lowp_refused(int v);                                     // op v's 16-bit path cannot run here (f32 instead)
//   void poison(float* x, int64_t n);                             // scratch left unwidened (the CPU's check: NaN)
//   static constexpr bool io_kernels_read_only_handed = true;     // a lowp_io call takes no unfilled scratch
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"
#include "core/exec/op_exec.h"
#include "core/model/autocast.h"
#include "core/model/op_rules.h"

namespace remat {

// Scratch for one call's widened copies: taken during the call, all given
// back after it. take() throws DeviceOutOfMemory when it cannot.
class MixedScratch {
 public:
  virtual ~MixedScratch() = default;
  virtual float* take(int64_t floats) = 0;
  virtual void give_back_all() = 0;
};

// bf16 or f16.
inline bool is_low_precision(DType d) { return d == DType::BF16 || d == DType::F16; }

}  // namespace remat

namespace remat::mixed {

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

// One op's call with its bf16/f16 tensors widened: the tables the f32 kernels
// get, the scratch behind them, and the parameters swapped for autocast's
// rounded copies (restored, and the scratch given back, when it ends).
template <class Dev>
class WidenedCall {
 public:
  WidenedCall(Dev& dev, const Model& m, int v, const TensorTable& t, MixedScratch& scratch)
      : dev_(dev), s_(dev.state()), m_(m), v_(v), op_(m.op(v)), t_(t), scratch_(scratch),
        cast_(autocast_lowers(op_.kind) && is_low_precision(op_.dtype) ? op_.dtype : DType::F32),
        act_(t.act.begin(), t.act.end()), grad_(t.grad.begin(), t.grad.end()), aux_(t.aux.begin(), t.aux.end()),
        copies_(cast_copies(op_, m.ops().first(static_cast<std::size_t>(v)))) {}
  ~WidenedCall() {
    for (const auto& [index, p] : swapped_params_) s_.params[index] = p;
    for (const auto& [index, p] : swapped_grads_) s_.grads[index] = p;
    scratch_.give_back_all();
  }
  WidenedCall(const WidenedCall&) = delete;
  WidenedCall& operator=(const WidenedCall&) = delete;

  TensorTable table() const { return TensorTable{act_, grad_, aux_}; }

  // A lowp_io call on a backend whose 16-bit kernels read and write only the
  // tensors handed over (Dev::io_kernels_read_only_handed: CUDA's, and the
  // CPU's check of them, whose f32 kernels run on buffers of their own) takes
  // no f32 scratch for what it leaves unwidened: the inputs, A(v) but a
  // loss's, G(v) and the input gradients stay the stored tensors in the
  // tables (never read as f32 there).
  void take_no_unfilled_scratch(bool on) { bare_io_ = on; }

  // Autocast's saved casts (cast_copies): the forward writes each input, as
  // the op read it (rounded to the cast), into its place in aux(v); the
  // backward reads the input from there, whether or not A(u) is still held.
  void store_cast_copies() const {
    auto* aux = static_cast<char*>(t_.aux[static_cast<std::size_t>(v_)]);
    for (const CastCopy& c : copies_) {
      const int u = op_.inputs[static_cast<std::size_t>(c.input)];
      dev_.narrow(c.dtype, static_cast<const float*>(act_[static_cast<std::size_t>(u)]), aux + c.offset, m_.op(u).numel());
    }
  }
  // Without `fill` (a lowp_gemm op, whose product reads the casts in 16
  // bits), the scratch is taken as before but left unwidened.
  void read_cast_copies(bool fill = true) {
    casts_unfilled_ = !fill;
    const auto* aux = static_cast<const char*>(t_.aux[static_cast<std::size_t>(v_)]);
    for (const CastCopy& c : copies_) {
      const int u = op_.inputs[static_cast<std::size_t>(c.input)];
      const int64_t n = m_.op(u).numel();
      float* w = scratch_.take(n);
      if (fill) dev_.widen(c.dtype, aux + c.offset, w, n);
      else poison(w, n);
      act_[static_cast<std::size_t>(u)] = w;
    }
  }
  bool has_copy(int u) const {
    return std::any_of(copies_.begin(), copies_.end(),
                       [&](const CastCopy& c) { return op_.inputs[static_cast<std::size_t>(c.input)] == u; });
  }

  // A(u) as op v reads it: its storage widened (and rounded to the cast, for
  // an input autocast casts), pointed at u's first element. Integer and
  // non-resident tensors stay as they are. Without `fill` (an operand a
  // lowp_gemm product reads in 16 bits only) the scratch is taken, the
  // bytes measured the same, but not written unless another read needs it;
  // a lowp_io call without f32 copies (take_no_unfilled_scratch) takes none.
  void read_act(int u, bool is_input, bool fill = true) {
    const auto ui = static_cast<std::size_t>(u);
    if (!t_.act[ui] || is_integer(m_.op(u).dtype) || (!fill && bare_io_)) return;
    const int st = m_.op(u).storage;
    const DType stored = m_.op(st).dtype;
    const DType cast = is_input ? cast_ : DType::F32;
    const bool casts = is_low_precision(cast) && cast != stored;
    if (!is_low_precision(stored) && !casts) return;
    const int64_t offset = storage_offset(m_, u);
    act_[ui] = storage_f32(st, static_cast<const char*>(t_.act[ui]) - dtype_size(stored) * offset, stored,
                           casts ? cast : DType::F32, fill) + offset;
  }

  // The forward's output: a view points into its widened storage (if any);
  // a low-precision owner is computed in f32 scratch.
  void prepare_output() {
    const auto vi = static_cast<std::size_t>(v_);
    if (op_.view) {
      for (const auto& [st, w] : widened_)
        if (st == op_.storage) act_[vi] = w + storage_offset(m_, v_);
      return;
    }
    // A loss's A(v) is written (and narrowed) by the call on either path.
    if (is_low_precision(op_.dtype) && !(bare_io_ && !is_loss(op_.kind))) act_[vi] = scratch_.take(op_.numel());
  }
  void store_output() const {
    const auto vi = static_cast<std::size_t>(v_);
    if (op_.view || !is_low_precision(op_.dtype)) return;
    // A loss kernel writes A(v) only where it holds an f32; the value is the backend's scalar.
    if (is_loss(op_.kind)) dev_.write_loss(static_cast<float*>(act_[vi]));
    dev_.narrow(op_.dtype, static_cast<const float*>(act_[vi]), t_.act[vi], op_.numel());
  }

  // A MatMul's aux holds contiguous copies of its operands in their dtypes
  // (a's, then b's); a norm captured in pure bf16/f16 on the CPU holds its
  // statistics in its dtype (norm_stats_in_dtype: PyTorch's CPU kernels
  // compute them in f32, normalise with those, and save them rounded). The
  // kernels fill and read f32 ones: the forward's are narrowed into aux
  // after the kernel (its output made from the f32 values), the backward's
  // widened from aux (the rounded values, as PyTorch's backward reads them).
  void prepare_aux(bool backward, bool fill = true) {
    if (norm_stats_in_dtype(op_)) pieces_ = {{op_.dtype, 2 * norm_stat_count(op_)}};
    else if (op_.kind == OpKind::MatMul && op_.aux_bytes > 0) pieces_ = matmul_pieces();
    else return;
    bool any_low = false;
    int64_t floats = 0;
    for (const Piece& p : pieces_) {
      any_low |= is_low_precision(p.dtype);
      floats += p.n;
    }
    if (!any_low) return;
    float* w = scratch_.take(floats);
    if (backward && !fill) poison(w, floats);
    if (backward && fill) {
      int64_t at = 0;
      const auto* src = static_cast<const char*>(t_.aux[static_cast<std::size_t>(v_)]);
      for (const Piece& p : pieces_) {
        dev_.widen(p.dtype, src, w + at, p.n);
        src += dtype_size(p.dtype) * static_cast<uint64_t>(p.n);
        at += p.n;
      }
    }
    aux_[static_cast<std::size_t>(v_)] = w;
    aux_widened_ = true;
  }
  void store_aux() const {
    if (!aux_widened_) return;
    const auto* w = static_cast<const float*>(aux_[static_cast<std::size_t>(v_)]);
    auto* dst = static_cast<char*>(t_.aux[static_cast<std::size_t>(v_)]);
    for (const Piece& p : pieces_) {
      dev_.narrow(p.dtype, w, dst, p.n);
      dst += dtype_size(p.dtype) * static_cast<uint64_t>(p.n);
      w += p.n;
    }
  }

  // Autocast's low-precision copies of the weights; with `grads`, the
  // weight gradients go to zeroed f32 scratch, rounded and added by add_param_grads.
  // With `weight16` (lowp_gemm), the weight (slot 0) is written as 16-bit
  // codes in the same scratch (half of it used: the bytes taken, and so the
  // scratch measured, are the f32 path's), read through lowp_operands(); the
  // bias stays an f32 copy for the f32 epilogue.
  void cast_params(bool grads, bool weight16 = false) {
    if (!is_low_precision(cast_)) return;
    const std::vector<ParamSpec> specs = op_params(m_, v_);
    for (std::size_t j = 0; j < specs.size(); ++j) {
      const std::size_t index = s_.param_slots.index(v_, static_cast<int>(j));
      const int64_t n = numel_of(specs[j].shape);
      float* p = scratch_.take(n);
      if (weight16 && j == 0) {
        dev_.narrow(cast_, s_.params[index], p, n);  // nearest even, as round_to: the same values
        weight16_ = p;
      } else {
        dev_.copy(p, s_.params[index], n);
        dev_.round_to(cast_, p, n);
      }
      swapped_params_.emplace_back(index, std::exchange(s_.params[index], p));
      if (!grads) continue;
      float* g = scratch_.take(n);
      dev_.zero(g, n);
      swapped_grads_.emplace_back(index, std::exchange(s_.grads[index], g));
      grad_numel_.push_back(n);
    }
  }
  void add_param_grads() {
    for (std::size_t j = 0; j < swapped_grads_.size(); ++j) {
      const auto& [index, master] = swapped_grads_[j];
      float* g = s_.grads[index];
      dev_.round_to(cast_, g, grad_numel_[j]);
      dev_.add(master, g, grad_numel_[j]);
    }
  }

  // The 16-bit operands of a lowp_gemm op (cast_params(…, true) done; in the
  // forward, store_cast_copies() done first): x from autocast's saved cast
  // (aux) where the op casts it, else its own 16-bit storage; G(v) as stored.
  // A MatMul's operand copies sit at the start of aux(v), a's then b's, in
  // the cast's dtype (matmul_pieces).
  // A Conv's (lowp_conv) 16-bit output goes to A(v)'s storage, its 16-bit
  // input gradient to the input's scratch left unwidened (read_act or
  // read_cast_copies without fill), never to memory the call reads.
  LowpOperands lowp_operands(bool backward) const {
    LowpOperands o;
    if (op_.kind == OpKind::Conv) {
      if (!backward) {
        o.y = t_.act[static_cast<std::size_t>(v_)];
        o.y_final = !op_.attrs->bias;
      }
      const int u = op_.inputs[0];
      if (backward && t_.grad[static_cast<std::size_t>(u)]) {
        o.dx = unwidened_scratch(u);
        if (!o.dx)
          throw InternalError(op_label(m_, v_) + ": no unwidened scratch for the 16-bit input gradient");
      }
    }
    o.dtype = cast_;
    o.w = weight16_;
    auto* aux = static_cast<char*>(t_.aux[static_cast<std::size_t>(v_)]);
    const bool matmul = op_.kind == OpKind::MatMul;
    const MatmulDims d = matmul ? matmul_dims(m_, v_) : MatmulDims{};
    for (std::size_t k = 0; k < (matmul ? 2u : 1u); ++k) {
      const int u = op_.inputs[k];
      void* p = nullptr;
      for (const CastCopy& c : copies_)
        if (op_.inputs[static_cast<std::size_t>(c.input)] == u) p = aux + c.offset;
      if (!p && (k == 0 ? d.aux_a : d.aux_b))
        p = aux + (k == 1 && d.aux_a ? dtype_size(cast_) * static_cast<uint64_t>(d.batch * d.m * d.k) : 0);
      if (!p) {
        if (m_.op(m_.op(u).storage).dtype != cast_)
          throw InternalError(op_label(m_, v_) + ": no " + std::string(dtype_name(cast_)) + " copy of input " +
                              std::to_string(k) + " for the 16-bit GEMM");
        p = t_.act[static_cast<std::size_t>(u)];
      }
      (k == 0 ? o.x : o.x1) = p;
    }
    if (backward) o.dy = t_.grad[static_cast<std::size_t>(v_)];
    return o;
  }

  // The tensors of a lowp_io op as stored, each at its first element (in
  // the backward after prepare_dx, whose entries say which gradients are
  // wanted and which are added): what the kernels read and write in place of
  // the widened copies, which are neither filled nor narrowed (nor taken at
  // all on CUDA: take_no_unfilled_scratch).
  IoOperands io_operands(bool backward) const {
    IoOperands o;
    o.active = true;
    const auto vi = static_cast<std::size_t>(v_);
    const bool reads_acts = !op_.view;  // a view's gradient reads G(v) alone (an Expand's A(v) outgrows its storage)
    for (std::size_t k = 0; k < op_.inputs.size() && k < 3; ++k) {
      const int u = op_.inputs[k];
      if (reads_acts) o.in[k] = {t_.act[static_cast<std::size_t>(u)], m_.op(m_.op(u).storage).dtype, false};
      if (backward)
        for (const Dx& d : dx_)
          if (d.u == u) o.dx[k] = {t_.grad[static_cast<std::size_t>(u)], m_.op(u).dtype, d.add};
    }
    if (reads_acts) o.out = {t_.act[vi], op_.dtype, false};
    if (backward) o.dy = {t_.grad[vi], op_.dtype, false};
    return o;
  }

  // G(v) widened for the kernel.
  void read_dy(bool fill = true) {
    const auto vi = static_cast<std::size_t>(v_);
    if (!t_.grad[vi] || !is_low_precision(op_.dtype) || (!fill && bare_io_)) return;
    float* w = scratch_.take(op_.numel());
    if (fill) dev_.widen(op_.dtype, t_.grad[vi], w, op_.numel());
    else poison(w, op_.numel());
    grad_[vi] = w;
  }

  // Each input gradient is computed alone in f32 scratch (an input given
  // twice gets both terms there, as the kernels add them); `acc` is what the
  // kernel is told.
  std::vector<uint8_t> prepare_dx(std::span<const uint8_t> accumulate) {
    std::vector<uint8_t> acc(op_.inputs.size(), 0);
    for (std::size_t k = 0; k < op_.inputs.size(); ++k) {
      const int u = op_.inputs[k];
      if (!t_.grad[static_cast<std::size_t>(u)]) continue;
      const auto seen = std::find_if(dx_.begin(), dx_.end(), [&](const Dx& d) { return d.u == u; });
      if (seen != dx_.end()) {
        acc[k] = 1;
        continue;
      }
      float* w = bare_io_ ? nullptr : scratch_.take(m_.op(u).numel());
      if (w) grad_[static_cast<std::size_t>(u)] = w;
      dx_.push_back({u, k < accumulate.size() && accumulate[k] != 0, w});
    }
    return acc;
  }
  // Rounded to what the op computed it as (the cast: autocast's copy's
  // gradient) and to the input's dtype, then stored or added.
  void store_dx(float seed) const {
    for (const Dx& d : dx_) {
      const Op& in = m_.op(d.u);
      const int64_t n = in.numel();
      if (seed != 1.0f) dev_.scale(d.f32, n, seed);
      if (is_low_precision(cast_) && cast_ != in.dtype) dev_.round_to(cast_, d.f32, n);
      dev_.round_to(in.dtype, d.f32, n);
      void* g = t_.grad[static_cast<std::size_t>(d.u)];
      if (d.add) dev_.add_stored(in.dtype, g, d.f32, n);
      else dev_.narrow(in.dtype, d.f32, g, n);
    }
  }

 private:
  struct Piece {
    DType dtype;
    int64_t n;
  };
  struct Dx {
    int u;
    bool add;
    float* f32;
  };

  float* storage_f32(int st, const void* base, DType stored, DType cast, bool fill) {
    const int64_t n = m_.op(st).numel();
    const auto widen = [&](float* w) {
      dev_.widen(stored, base, w, n);
      dev_.round_to(cast, w, n);
    };
    for (const auto& [s, w] : widened_) {
      if (s != st) continue;
      const auto left = std::find(unfilled_.begin(), unfilled_.end(), st);
      if (fill && left != unfilled_.end()) {  // taken for a 16-bit operand, now read in f32 too
        widen(w);
        unfilled_.erase(left);
      }
      return w;
    }
    float* w = scratch_.take(n);
    if (fill) widen(w);
    else {
      poison(w, n);
      unfilled_.push_back(st);
    }
    widened_.emplace_back(st, w);
    return w;
  }
  // Input u's f32 scratch where this call took it and left it unwidened.
  float* unwidened_scratch(int u) const {
    auto* at = static_cast<float*>(act_[static_cast<std::size_t>(u)]);
    if (at == t_.act[static_cast<std::size_t>(u)]) return nullptr;
    if (has_copy(u)) return casts_unfilled_ ? at : nullptr;
    const int st = m_.op(u).storage;
    return std::find(unfilled_.begin(), unfilled_.end(), st) != unfilled_.end() ? at : nullptr;
  }
  void poison(float* w, int64_t n) {
    if constexpr (requires { dev_.poison(w, n); }) dev_.poison(w, n);
  }

  std::vector<Piece> matmul_pieces() const {
    const MatmulDims d = matmul_dims(m_, v_);
    std::vector<Piece> out;
    const auto before = m_.ops().first(static_cast<std::size_t>(v_));
    if (d.aux_a) out.push_back({operand_dtype(op_, before, 0), d.batch * d.m * d.k});
    if (d.aux_b) out.push_back({operand_dtype(op_, before, 1), d.batch * d.k * d.n});
    return out;
  }

  Dev& dev_;
  typename Dev::State& s_;
  const Model& m_;
  const int v_;
  const Op& op_;
  const TensorTable& t_;
  MixedScratch& scratch_;
  const DType cast_;  // what autocast casts the inputs and weights to; F32: nothing
  std::vector<void*> act_, grad_, aux_;
  std::vector<std::pair<int, float*>> widened_;  // storage id -> its f32 copy
  std::vector<int> unfilled_;                     // storages of widened_ taken but not written
  std::vector<Piece> pieces_;
  bool aux_widened_ = false;
  bool casts_unfilled_ = false;  // read_cast_copies took their scratch without widening
  bool bare_io_ = false;         // take_no_unfilled_scratch
  std::vector<std::pair<std::size_t, float*>> swapped_params_, swapped_grads_;  // index -> the master's pointer
  std::vector<int64_t> grad_numel_;
  std::vector<Dx> dx_;
  std::vector<CastCopy> copies_;
  const float* weight16_ = nullptr;  // cast_params' 16-bit weight, when asked for
};

template <class Dev>
GemmMode gemm_mode_of(Dev& dev) {
  if constexpr (requires { dev.gemm_mode(); }) return dev.gemm_mode();
  else return GemmMode::F32;
}
template <class Dev>
PointwiseMode pointwise_mode_of(Dev& dev) {
  if constexpr (requires { dev.pointwise_mode(); }) return dev.pointwise_mode();
  else return PointwiseMode::F32;
}
// The tensors handed to the backend for one lowp_io kernel call, taken back
// after it (an exception included).
template <class Dev>
class IoScope {
 public:
  IoScope(Dev& dev, const IoOperands& o) : dev_(dev) { set(o); }
  ~IoScope() { set(IoOperands{}); }
  IoScope(const IoScope&) = delete;
  IoScope& operator=(const IoScope&) = delete;

 private:
  void set(const IoOperands& o) {
    if constexpr (requires { dev_.set_io(o); }) dev_.set_io(o);
  }
  Dev& dev_;
};
template <class Dev>
GemmMode conv_mode_of(Dev& dev) {
  if constexpr (requires { dev.conv_mode(); }) return dev.conv_mode();
  else return GemmMode::F32;
}
// lowp_call, less the ops whose 16-bit path the backend cannot run (a
// convolution cuDNN has no deterministic 16-bit algorithm for: a property
// of the op and the device, the same under every strategy).
template <class Dev>
bool lowp_here(Dev& dev, const Model& model, int v, bool backward) {
  if (!lowp_call(model, v, backward, gemm_mode_of(dev), conv_mode_of(dev))) return false;
  if constexpr (requires { dev.lowp_refused(v); }) return !dev.lowp_refused(v);
  else return true;
}
// The operands handed to the backend for one kernel call, taken back after
// it (an exception included), so that no later call reads them.
template <class Dev>
class LowpScope {
 public:
  LowpScope(Dev& dev, const LowpOperands& o) : dev_(dev) { set(o); }
  ~LowpScope() { set(LowpOperands{}); }
  LowpScope(const LowpScope&) = delete;
  LowpScope& operator=(const LowpScope&) = delete;

 private:
  void set(const LowpOperands& o) {
    if constexpr (requires { dev_.set_lowp(o); }) dev_.set_lowp(o);
  }
  Dev& dev_;
};


template <class Dev>
void forward(Dev& dev, const Model& model, int v, const TensorTable& t, MixedScratch& scratch) {
  WidenedCall<Dev> w(dev, model, v, t, scratch);
  const bool lowp = lowp_here(dev, model, v, false);
  // A lowp_io op's kernel reads and writes the tensors as stored: nothing widened, nothing narrowed.
  const bool io = !lowp && lowp_io(model, v, false, pointwise_mode_of(dev));
  if constexpr (requires { Dev::io_kernels_read_only_handed; }) w.take_no_unfilled_scratch(io);
  const std::vector<int>& in = model.op(v).inputs;
  // A lowp_gemm product reads its operands in 16 bits: their f32 scratch is
  // taken, not written, except where autocast's cast is made from it.
  for (std::size_t k = 0; k < in.size(); ++k)
    w.read_act(in[k], true, !io && !(lowp && gemm_reads_16_bits_only(model, v, k, false) && !w.has_copy(in[k])));
  w.prepare_output();
  w.prepare_aux(false);
  w.cast_params(false, lowp);
  const TensorTable table = w.table();
  OpCall c(model, v, table);
  if (lowp) w.store_cast_copies();  // the GEMM reads x's cast from there
  const LowpOperands lowp_ops = lowp ? w.lowp_operands(false) : LowpOperands{};
  {
    const LowpScope<Dev> scope(dev, lowp_ops);
    const IoScope<Dev> io_scope(dev, io ? w.io_operands(false) : IoOperands{});
    dev.forward(c);
  }
  // A Conv without bias on cuDNN's 16-bit path wrote A(v) as stored (one
  // rounding, the f32 path's): its f32 output was taken (the bytes measured
  // stay the f32 path's) but neither written nor narrowed. A lowp_io op
  // stored its own, but for a loss: its A(v) is the backend's scalar, written
  // (and narrowed) by the call as on the widening path.
  if (!lowp_ops.y_final && (!io || is_loss(model.op(v).kind))) w.store_output();
  w.store_aux();
  if (!lowp) w.store_cast_copies();
}

template <class Dev>
void backward(Dev& dev, const Model& model, int v, const TensorTable& t, std::span<const uint8_t> accumulate,
              MixedScratch& scratch, float seed) {
  // An integer op (a TopK's indices, views of them) passes no gradient on,
  // as the backends' own backward says; here its input gradient would be
  // unwritten f32 scratch, rounded and stored (or added) into G(x): a TopK of
  // a bf16 softmax (a router under autocast) put stale values, which depend on
  // what the scratch held before and so on the strategy, into the router's gradient.
  if (is_integer(model.op(v).dtype)) return;
  WidenedCall<Dev> w(dev, model, v, t, scratch);
  // A lowp_gemm op's backward reads its operands, its own output and (a
  // MatMul) G(v) in 16 bits only: their f32 scratch is taken, not written.
  const bool lowp = lowp_here(dev, model, v, true);
  // A lowp_io op's kernel reads A and G as stored and stores (or adds) each
  // input gradient rounded once, as store_dx would (the loss's seed aside).
  const bool io = !lowp && seed == 1.0f && lowp_io(model, v, true, pointwise_mode_of(dev));
  if constexpr (requires { Dev::io_kernels_read_only_handed; }) w.take_no_unfilled_scratch(io);
  const std::vector<int>& in = model.op(v).inputs;
  for (std::size_t k = 0; k < in.size(); ++k)
    if (!w.has_copy(in[k])) w.read_act(in[k], true, !io && !(lowp && gemm_reads_16_bits_only(model, v, k, true)));
  w.read_cast_copies(!lowp);
  w.read_act(v, false, !lowp && !io);
  // A Linear's bias gradient sums the f32 G, and so does a Conv's, where it has a bias.
  const Op& op = model.op(v);
  w.read_dy(!io && !(lowp && (op.kind == OpKind::MatMul || (op.kind == OpKind::Conv && !op.attrs->bias))));
  const std::vector<uint8_t> acc = w.prepare_dx(accumulate);
  w.prepare_aux(true, !lowp);
  w.cast_params(true, lowp);
  const TensorTable table = w.table();
  OpCall c(model, v, table, acc);
  {
    const LowpScope<Dev> scope(dev, lowp ? w.lowp_operands(true) : LowpOperands{});
    const IoScope<Dev> io_scope(dev, io ? w.io_operands(true) : IoOperands{});
    dev.backward(c);
  }
  if (!io) w.store_dx(seed);
  w.add_param_grads();
}

}  // namespace remat::mixed
