// How an op kind executes, on any backend (the kinds: exec_kinds.h):
// - its parameter tensors (shapes, names, how the executor initialises them);
// - the scratch its backward needs, sized once per model at load();
// - OpCall: the checked view of one op's tensors that every kernel entry gets,
//   so no backend re-derives "which pointer is the input" or "is it resident".
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/exec/backend.h"
#include "core/kernels/cpu_kernels.h"
#include "core/model/model.h"
#include "core/model/op_rules.h"

namespace remat {

// How the executor draws a parameter's initial values (make_host_data).
enum class ParamInit : uint8_t {
  FanIn,     // uniform in ±1/sqrt(fan_in), fan_in = the elements of one output
             // unit's weights (slot 0's shape without its first dimension), as
             // PyTorch's default for Linear and Conv (bias included)
  NearOne,   // 1 + U(±0.1)  (LayerNorm gamma)
  NearZero,  // U(±0.1)      (LayerNorm beta)
};

struct ParamSpec {
  const char* name;  // "weight", "bias", "gamma", "beta"
  std::vector<int64_t> shape;
  ParamInit init;
};

// Scratch slots of the backward passes. Each is one buffer per backend, sized
// at load() to the largest need of any op of the model.
enum ScratchSlot : int {
  kPreActGrad = 0,  // Dense: the gradient of the pre-activation (rows, out)
  kDiscardedDx = 1, // the input gradient of an op whose input has none (the model input)
  kConvColumns = 2, // Conv (CPU): a run of images' im2col columns and output or dy rows (conv2d_scratch_floats)
  kMatmulA = 3,     // MatMul: a contiguous copy of an operand read through strides
  kMatmulB = 4,     //   that PyTorch multiplies in place (no copy in aux)
  kAttention = 5,   // Attention: one head's gathered q, k, v, scores and fresh gradients (SdpaGeom)
  kConcatPiece = 6, // Concat: its constant piece broadcast (forward), that piece's share of dy (backward)
  kDenseInput = 7,  // a dense copy of a strided input for a kernel that reads rows (dense_copy)
  kScratchSlots = 8,
};
using ScratchFloats = std::array<int64_t, kScratchSlots>;

// Parameter tensors of op v in slot order; empty for kinds without parameters
// and for kinds that cannot be executed.
std::vector<ParamSpec> op_params(const Model& model, int v);
// Floats each scratch slot needs for the backward of op v.
ScratchFloats op_scratch(const Model& model, int v);
// The most any op of the model needs, per slot.
ScratchFloats model_scratch(const Model& model);
// True when `kind` is in REMAT_EXEC_KINDS.
bool exec_kind_listed(OpKind kind);

// Where each op's parameter tensors are in a backend's per-tensor arrays
// (parameter_tensors order): both backends' kernel state holds one.
class ParamSlots {
 public:
  ParamSlots() = default;
  explicit ParamSlots(const Model& model);
  std::size_t index(int v, int slot) const {
    return static_cast<std::size_t>(first_[static_cast<std::size_t>(v)] + slot);
  }

 private:
  std::vector<int> first_;  // per op: index of its first parameter tensor, -1 when none
};

// The kernels' geometry of a Conv, MaxPool or AvgPool op (NCHW; a 1-D op is
// H = 1). InputError when the op needs what the kernels lack (asymmetric
// pads): executable() refuses those ops first.
cpu::ConvGeom conv_geom(const Model& model, int v);
// A ConvTranspose as the convolution it is the gradient of: that convolution
// reads the op's output shape (n, channels, out...) with the op's weight
// (C, channels/groups, kernel...) as its (k, c/groups, r, s) and produces the
// op's input shape. Forward is that convolution's input gradient, the
// backward its forward (dx) and its weight gradient (dW).
cpu::ConvGeom conv_transpose_geom(const Model& model, int v);
cpu::PoolGeom pool_geom(const Model& model, int v);
// An Attention op's heads, sizes, scale and its inputs' strides in their
// storages (rank 3 is one head per batch entry).
cpu::SdpaGeom sdpa_geom(const Model& model, int v);
// kernel_attr_problem() (core/model/op_rules.h) says why the kernels cannot run
// an op's attributes.

// (N, C, spatial...) as the batch norm and pooling kernels take it: hw is the
// product of the spatial dimensions (1 for (N, C)).
struct NCS {
  int64_t n, c, hw;
};
NCS ncs_of(const Op& op);
// Concat along its axis: outer = the dimensions before it, inner = those after,
// widths = each piece's extent along it, in order: the inputs, and a constant
// piece at index `piece` (-1: none), which the backends hand over broadcast
// in scratch kConcatPiece.
struct ConcatDims {
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> widths;
  int64_t piece = -1;
};
ConcatDims concat_dims(const Model& model, int v);
// (planes, ih, iw) -> (planes, oh, ow) of an Upsample (a 1-D one has ih = oh = 1).
struct UpsampleDims {
  int64_t planes = 1, ih = 1, iw = 1, oh = 1, ow = 1;
};
UpsampleDims upsample_dims(const Model& model, int v);
// PyTorch's default batch norm epsilon (both backends).
constexpr float kBatchNormEps = 1e-5f;
// The epsilon a LayerNorm or BatchNorm adds to the variance: the model's, or
// PyTorch's default 1e-5 (attribute 0). LayerNorm's CPU kernel adds it in
// double; BatchNorm's take it as a float.
inline double layernorm_eps(const Op& op) { return op.attrs->eps > 0 ? op.attrs->eps : 1e-5; }
inline float batchnorm_eps(const Op& op) { return op.attrs->eps > 0 ? static_cast<float>(op.attrs->eps) : kBatchNormEps; }

// A MatMul as the kernels run it: product i < batch of c (batch, m, n) is
// a_i (m, k) · b_i (k, n), with torch.matmul's broadcast batch: a_i is matrix
// a_of[i] of a (in a's own batch, row-major; a broadcast operand repeats
// matrices), likewise b. An input whose strides cannot be folded to that
// shape is copied, expanded to the whole batch (matrix i is a_i), into aux(v)
// (the copy PyTorch saves: a first, then b); one that folds but is not
// contiguous is gathered, unexpanded, into scratch kMatmulA/B. The gradient of
// a broadcast operand sums its products' in product order.
struct MatmulDims {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool aux_a = false, aux_b = false;
  bool scratch_a = false, scratch_b = false;
  std::vector<int64_t> a_of, b_of;
  // The matrix of a (b) that product i reads from the tensor the kernel is
  // handed: i for an aux copy, else a_of[i] (b_of[i]).
  std::vector<int64_t> a_read() const;
  std::vector<int64_t> b_read() const;
};
MatmulDims matmul_dims(const Model& model, int v);

// One strided-batched GEMM of a MatMul: its products j < count read matrix
// x + j·sx of the left operand and y + j·sy of the right one, and write matrix
// z + j·sz of the result (distinct for each j: sz != 0 unless count is 1),
// adding to it when `accumulate`.
struct GemmRun {
  int64_t count = 0, x = 0, sx = 0, y = 0, sy = 0, z = 0, sz = 0;
  bool accumulate = false;
};
// Products i (matrices x[i] · y[i] into z[i]) grouped into runs, in rounds:
// round r holds each z's r-th product (so a broadcast operand's gradient of
// B·H products onto H matrices is B runs, not B·H), and every product after
// a z's first adds to it. Each z thus sums its products in increasing i on
// every backend (deterministic: recomputation stays bitwise identical);
// `accumulate` makes the first write of each z add too.
std::vector<GemmRun> gemm_runs(std::span<const int64_t> x, std::span<const int64_t> y, std::span<const int64_t> z,
                               bool accumulate);
// 0, 1, ..., n - 1: the products' own index (the result, or its gradient).
std::vector<int64_t> iota_index(int64_t n);

// A *Const or MaskedFill op's constant as the kernels read it: the values
// (MulConst, DivConst, a fixed AddConst: f32) or the mask (MaskedFill: one
// byte per element, 1 = filled). Empty for a learned AddConst (a parameter).
// Backends hold it from load() on, counted in the baseline.
std::vector<uint8_t> constant_bytes(const Op& op);
// A Pointwise op: its fixed constant's f32 values, then its scalar operand.
// Elements of the constant, which repeats over the op's output.
int64_t constant_numel(const Op& op);
cpu::ConstOp const_op(OpKind kind);
// A Pointwise op as the kernels run it: each operand's strides over the
// output's index (an input's layout, the constant's row-major order, 0 where
// it broadcasts) and its own extents (pointwise_operands says which is which).
cpu::PwGeom pointwise_geom(const Model& model, int v);
// Whether an input of op v is laid out other than row-major (a transposed or
// sliced view, an Attention's output): a Concat then copies it through its strides.
bool reads_strided(const Model& model, int v);
// Input k of Concat v copied into its slice of the output: the family's
// identity (cast) from the input's strides to the output's; out_offset is
// where the slice starts (elements). What a Concat of strided inputs runs.
cpu::PwGeom concat_piece_geom(const Model& model, int v, std::size_t k, int64_t& out_offset);
// Concat v's constant piece, broadcast into scratch (kConcatPiece, row-major
// over the piece as it lies in the output), copied into its slice: what a
// Concat of strided inputs and a class token runs.
cpu::PwGeom concat_const_geom(const Model& model, int v, int64_t& out_offset);
// An op whose kernel reads its input densely (rows of features) but is handed
// a strided one (a transposed or sliced view, an Attention's output): where
// the backend copies that input first, through its strides, so the kernel
// reads it as it is. Scratch: a transient copy in kDenseInput, made again in
// the backward when the backward reads the input (its saved set keeps it);
// PyTorch's elementwise ops read through strides and its layer_norm,
// softmax, convolutions, batch and group norms, pools and upsampling copy
// transiently, so the model charges nothing. Aux: a Linear whose
// rule charges the folded copy PyTorch multiplies and saves (aux_bytes): made
// into aux(v) by the forward, read by the backward. None: input 0 is dense,
// or the kind reads strides itself.
enum class DenseCopy : uint8_t { None, Scratch, Aux };
DenseCopy dense_copy(const Model& model, int v);
// Op u's elements through its strides into a dense buffer of its shape (the family's identity).
cpu::PwGeom dense_copy_geom(const Model& model, int u);
// An Add handed a non-contiguous input (MaxViT's departitioned windows, laid
// out as the partition left them): the family's add through each input's
// strides into the dense output, as PyTorch's add reads strides and copies
// nothing. Its backward is unchanged: G(v) is dense, dy to each input.
cpu::PwGeom strided_add_geom(const Model& model, int v);
// Whether the backward of op v reads the dense copy (it keeps the input, or the copy in aux).
bool dense_copy_in_backward(const Model& model, int v);
// A Reduce op: its input's shape and strides and the axes it reduces.
cpu::ReduceGeom reduce_geom(const Model& model, int v);
// A TopK op: its input's shape and strides, the axis and k.
cpu::TopKGeom topk_geom(const Model& model, int v);
// A Gather op: the index's shape and strides, the input's, and the axis.
cpu::GatherGeom gather_geom(const Model& model, int v);
// A Cumsum op as (outer, len, inner) around its axis (its input dense:
// dense_copy makes a strided one so).
cpu::ScanGeom cumsum_geom(const Model& model, int v);

// Where a view's elements are in its input, both in logical row-major order:
// element i of the view (row-major over view_shape) is element
// base + Σ index_j · stride_j of the input. A Reshape is the identity, a
// Transpose permutes, a Slice steps, an Expand repeats (stride 0).
struct ViewMap {
  std::vector<int64_t> shape, stride;
  int64_t base = 0;
};
ViewMap view_map(const Model& model, int v);
// A Concat's constant piece: element i (row-major over the piece as it lies in
// the output, broadcast outside the axis) is element `at` of the parameter
// (const_shape, row-major).
ViewMap concat_piece_map(const Model& model, int v);
// Element offset of view v's first element in its storage (0 for an owner).
int64_t storage_offset(const Model& model, int v);
// Input k of MatMul v expanded to the product's batch (its own last two
// dimensions kept; a broadcast dimension has stride 0), in its storage's
// element strides: the elements of its aux copy, in order.
ViewMap matmul_expanded(const Model& model, int v, std::size_t k);
// The same elements in the same order in as few dimensions as the strides
// allow: size-1 dimensions dropped, a dimension merged into the one before it
// when one stride walks both (stride[d-1] == stride[d]·shape[d]; two repeats,
// stride 0, included). The CUDA kernels take maps of rank 8 at most.
ViewMap coalesced(const ViewMap& m);
// Calls f(view_index, input_index) for every element of the map, in the view's order.
template <class F>
void for_each_mapped(const ViewMap& m, F f) {
  const std::size_t r = m.shape.size();
  int64_t n = 1;
  for (const int64_t d : m.shape) n *= d;
  if (n == 0) return;
  if (r == 0) {
    f(int64_t{0}, m.base);
    return;
  }
  // The last axis as a plain loop; the odometer steps the others once per row
  // (the same order, last axis fastest).
  const int64_t len = m.shape[r - 1], step = m.stride[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t at = m.base;
  for (int64_t i = 0; i < n; i += len) {
    for (int64_t j = 0; j < len; ++j) f(i + j, at + j * step);
    for (std::size_t j = r - 1; j-- > 0;) {
      at += m.stride[j];
      if (++idx[j] < m.shape[j]) break;
      at -= m.stride[j] * m.shape[j];
      idx[j] = 0;
    }
  }
}

// The activation a kernel applies for an activation op or a Dense.
cpu::Act kernel_act(OpKind kind);
cpu::Act kernel_act(Activation a);

// "op 3 ('fc1')" for messages.
std::string op_label(const Model& model, int v);

// One op's tensors as the executor handed them over. Reads of activations are
// checked: a custom saved set that leaves a needed tensor out is the model's
// fault (InputError), never a read of freed memory.
class OpCall {
 public:
  OpCall(const Model& model, int v, const TensorTable& t, std::span<const uint8_t> accumulate = {})
      : model(model), v(v), op(model.op(v)), t_(t), acc_(accumulate) {}

  const Model& model;
  const int v;
  const Op& op;

  const Op& in_op(std::size_t k) const { return model.op(op.inputs.at(k)); }
  // A of input k (forward and backward), A(v) (backward, and the output's pointer).
  const float* in(std::size_t k) const { return k == 0 && dense_in0_ ? dense_in0_ : need(op.inputs.at(k)); }
  // Input 0 as a dense copy the backend made (dense_copy), read by in(0) instead.
  void set_dense_in0(const float* p) { dense_in0_ = p; }
  const float* self() const { return need(v); }
  float* out() const { return static_cast<float*>(t_.act[static_cast<std::size_t>(v)]); }
  // G(v): nullptr for the loss (its gradient is the implicit 1).
  const float* dy() const { return static_cast<const float*>(t_.grad[static_cast<std::size_t>(v)]); }
  // G of input k, or nullptr when that input has no gradient tensor.
  float* dx(std::size_t k) const {
    return static_cast<float*>(t_.grad[static_cast<std::size_t>(op.inputs.at(k))]);
  }
  // Add into dx(k) (true) or overwrite it (false).
  bool acc(std::size_t k) const { return k < acc_.size() && acc_[k] != 0; }
  // aux(v), op.aux_bytes of private saved tensors (LayerNorm: mean, rstd per row).
  float* aux() const;
  const TensorTable& table() const { return t_; }

 private:
  const float* need(int u) const;
  const TensorTable& t_;
  std::span<const uint8_t> acc_;
  const float* dense_in0_ = nullptr;
};

// A Pointwise op's kernel arguments on any backend: the geometry and each
// operand's pointer: an input (in the backward only where a derivative of an
// operand that needs a gradient reads it: the rest may be freed, op_rules'
// saved sets), the fixed constant and the scalar (constant_bytes, held by the
// backend from load()), a learned constant (the op's parameter); `y` the
// output where a derivative reads it. State: CpuOpState or CudaOpState.
struct PwCall {
  cpu::PwGeom g;
  PwOperands ops;
  const float* x[3] = {};
  const float* y = nullptr;
};
template <typename State>
PwCall pointwise_call(const State& s, const OpCall& c, bool backward) {
  PwCall a{pointwise_geom(c.model, c.v), pointwise_operands(c.op)};
  const pw::FnInfo& f = pw::kFns[c.op.attrs->fn];
  uint8_t reads = 0;
  if (backward)
    for (int k = 0; k < a.ops.arity; ++k)
      if (pointwise_needs_grad(c.op, a.ops, k, c.model.ops())) reads |= f.reads[k];
  const auto* constant = static_cast<const float*>(s.constant(c.v));
  for (int k = 0; k < a.ops.arity; ++k) {
    const PwOperand& o = a.ops.at[k];
    if (o.src == PwOperand::Input) {
      if (!backward || (reads & (1 << k))) a.x[k] = c.in(static_cast<std::size_t>(o.input));
    } else if (o.src == PwOperand::Constant) {
      a.x[k] = c.op.attrs->learned ? s.param(c.v, 0) : constant;
    } else {
      // After the fixed constant's values, if the op has one.
      a.x[k] = constant + (c.op.attrs->const_at >= 0 && !c.op.attrs->learned ? constant_numel(c.op) : 0);
    }
  }
  if (backward && (reads & pw::kY)) a.y = c.self();
  return a;
}
// Calls grad(k, dx, accumulate) for each operand of Pointwise op c that
// takes a gradient, in operand order (an input given twice, x * x, is
// written, then added to): an input's G, or a learned constant's parameter
// gradient (always added to). An input that carries no gradient to a
// parameter (grad_flow.h) takes none: its derivative may read what autograd
// did not keep (mul(w·h, rsqrt of the input's mean square) keeps only the rsqrt).
template <typename State, typename Grad>
void for_each_pointwise_grad(const State& s, const OpCall& c, const PwOperands& ops, Grad grad) {
  for (int k = 0; k < ops.arity; ++k) {
    const PwOperand& o = ops.at[k];
    if (o.src == PwOperand::Input && c.dx(static_cast<std::size_t>(o.input)) &&
        pointwise_needs_grad(c.op, ops, k, c.model.ops()))
      grad(k, c.dx(static_cast<std::size_t>(o.input)), c.acc(static_cast<std::size_t>(o.input)));
    else if (o.src == PwOperand::Constant && c.op.attrs->learned)
      grad(k, s.param_grad(c.v, 0), true);
  }
}

// A norm's γ and β (slots 0, 1) and their gradients, or null for a norm without
// affine parameters (affine false): the kernels then scale by 1, shift by 0
// and form no parameter gradient (cpu_kernels.h).
template <typename State>
const float* norm_param(const State& s, const OpCall& c, int slot) {
  return c.op.attrs->affine ? s.param(c.v, slot) : nullptr;
}
template <typename State>
float* norm_param_grad(State& s, const OpCall& c, int slot) {
  return c.op.attrs->affine ? s.param_grad(c.v, slot) : nullptr;
}

// A backend's kernel table: fwd_<entry>/bwd_<entry> per listed kind, over the
// backend's own state type S. Generated in each backend from REMAT_EXEC_KINDS.
template <typename S>
struct KernelEntry {
  OpKind kind;
  void (*fwd)(S&, const OpCall&);
  void (*bwd)(S&, const OpCall&);
};

// The entry of `kind` in `table`; InputError "the <backend> backend cannot run
// a <kind> (op ...)" when it has none.
template <typename S, std::size_t N>
const KernelEntry<S>& kernel_for(const std::array<KernelEntry<S>, N>& table, const OpCall& c,
                                 const char* backend) {
  for (const auto& e : table)
    if (e.kind == c.op.kind) return e;
  throw InputError(op_label(c.model, c.v) + ": the " + backend + " backend cannot run a " +
                   std::string(kind_name(c.op.kind)));
}

}  // namespace remat
