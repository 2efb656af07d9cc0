// One forward op of a model: what it computes, the tensor it produces and what
// its backward reads (the memory model of docs/memory-model.md).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/copy_on_write.h"
#include "core/base/small_vec.h"
#include "core/model/op_kinds.h"

namespace remat {

// The op kinds, generated from the one list of op_kinds.h (what each kind
// computes, with its rule and, if it runs, its kernels' entry).
#define REMAT_OP_KIND_ENUM(Kind, ...) Kind,
enum class OpKind : uint8_t { REMAT_OP_KINDS(REMAT_OP_KIND_ENUM, REMAT_OP_KIND_ENUM) };
#undef REMAT_OP_KIND_ENUM
#define REMAT_OP_KIND_COUNT(...) +1
constexpr int kOpKindCount = 0 REMAT_OP_KINDS(REMAT_OP_KIND_COUNT, REMAT_OP_KIND_COUNT);
#undef REMAT_OP_KIND_COUNT
constexpr OpKind kLastOpKind = static_cast<OpKind>(kOpKindCount - 1);
// Loss kinds end a model.
inline bool is_loss(OpKind k) {
  return k == OpKind::MSELoss || k == OpKind::SoftmaxCELoss || k == OpKind::BCEWithLogitsLoss;
}
// A loss that compares its input with a target of the input's shape (MSE, BCE), not with labels.
inline bool has_target(OpKind k) { return k == OpKind::MSELoss || k == OpKind::BCEWithLogitsLoss; }

enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

// Activation fused into a Dense op.
enum class Activation : uint8_t { None, ReLU, Tanh };

std::string_view kind_name(OpKind k);
bool parse_kind(std::string_view s, OpKind& out);
std::string_view dtype_name(DType d);
bool parse_dtype(std::string_view s, DType& out);
uint64_t dtype_size(DType d);
std::string_view activation_name(Activation a);
bool parse_activation(std::string_view s, Activation& out);

// A constant's values, row-major over its shape. Shared, so that copying a
// Model stays cheap (one causal mask serves every block of a GPT); compared
// by value.
struct ConstValues {
  std::shared_ptr<const std::vector<float>> values;
  bool empty() const { return !values || values->empty(); }
  std::size_t size() const { return values ? values->size() : 0; }
  const float* data() const { return values ? values->data() : nullptr; }
  bool operator==(const ConstValues& o) const {
    return empty() ? o.empty() : !o.empty() && (values == o.values || *values == *o.values);
  }
};

// A causal mask over (seq, seq): 1 above the diagonal (a position never sees a later one).
ConstValues causal_mask_values(int64_t seq);
// Whether `c` over `shape` (…, seq, seq, leading dims 1) is that mask.
bool is_causal_mask(const std::vector<int64_t>& shape, const ConstValues& c);

// Attributes of the kinds that take them (op_rules.cpp says which reads what).
// An Op holds them copy-on-write (below): read op.attrs->axis, write
// op.attrs.edit().axis = 1 or assign a whole OpAttrs.
struct OpAttrs {
  int64_t channels = 0;            // Conv: output channels
  int64_t vocab = 0;               // Embedding: rows of the table
  int64_t k = 0;                   // TopK: how many it picks along axis
  std::vector<int64_t> kernel;     // Conv, MaxPool, AvgPool: spatial kernel (1 or 2 dims)
  std::vector<int64_t> stride;     // default 1 per spatial dim
  std::vector<int64_t> pads;       // begins then ends (ONNX order); default 0. Pad: PyTorch's order (below)
  std::vector<int64_t> dilation;   // Conv, MaxPool; default 1
  int64_t groups = 1;              // Conv, ConvTranspose, GroupNorm (the groups of channels)
  std::vector<int64_t> output_padding;  // ConvTranspose: added to one side of each output dimension; default 0
  bool bilinear = false;           // Upsample: bilinear interpolation (else nearest)
  bool align_corners = false;      // Upsample (bilinear): corners of input and output align, as PyTorch's flag
  bool ceil_mode = false;          // MaxPool, AvgPool
  bool count_include_pad = true;   // AvgPool: the padding counts in the divisor (PyTorch's default)
  std::vector<int64_t> output_size;  // AvgPool: adaptive (PyTorch's adaptive_avg_pool2d) to this spatial size; no kernel then
  bool bias = true;                // Conv, Linear: a bias vector among the parameters
  int64_t axis = -1;               // Softmax, Concat, Slice, TopK, Gather (negative: from the end)
  std::vector<int64_t> perm;       // Transpose
  int64_t start = 0, end = 0, step = 1;  // Slice along axis: [start, end) by step
  std::vector<int64_t> const_shape;      // *Const, MaskedFill: the constant's shape ([] = scalar)
  // *Const: the constant's values (one for a scalar); MaskedFill: its mask
  // (non-zero: filled). Empty: unknown, the op is simulate-only. A learned
  // AddConst's values are its parameter's initial values (optional).
  ConstValues values;
  float fill = -std::numeric_limits<float>::infinity();  // MaskedFill: the value written where the mask is set
  bool learned = false;  // AddConst, Concat: the constant is a parameter with a gradient (a learned position table, a class token)
  // Concat: where a constant piece goes among the concatenated pieces (0: before
  // input 0, k: after input k-1); Pointwise: the operand the constant is; -1: none. Its shape is const_shape (the op's
  // rank, broadcast to the output outside the axis), its values `values`.
  int64_t const_at = -1;
  bool copy = false;     // Reshape: a copy even where a view would do (PyTorch's clone)
  bool causal = false;   // Attention: query i attends to keys j <= i (PyTorch's is_causal, top-left)
  float scale = 0;       // Attention: the factor on q·kᵀ; 0: 1/sqrt(D), PyTorch's default
  // Pointwise: the function (pw::Fn) and its operands: the activation inputs
  // in order, the constant (const_shape, values, learned) at operand
  // const_at (above; -1: none), and a scalar for a last operand neither fills;
  // alpha and beta are the function's attributes (leaky_relu's slope, elu's
  // alpha, softplus's beta and threshold, clamp's min and max), set to the
  // function's (a file that leaves them out gets PyTorch's defaults).
  // Reduce: the function (pw::ReduceFn), the axes (sorted, non-negative;
  // empty: all) and keepdim.
  uint8_t fn = 0;
  float scalar = 0;
  float alpha = 0, beta = 0;
  std::vector<int64_t> axes;
  bool keepdim = false;
  double eps = 0;        // LayerNorm, BatchNorm, GroupNorm: added to the variance; 0: PyTorch's default 1e-5
  bool affine = true;    // LayerNorm, BatchNorm, GroupNorm: a scale γ and shift β among the parameters
  // SoftmaxCELoss: ε of PyTorch's label_smoothing, in [0, 1]: the target is
  // (1 − ε)·one-hot + ε/classes (0: plain cross-entropy).
  double label_smoothing = 0;
  // Pad: the mode (PadMode, core/kernels/pad_geom.h); `pads` as F.pad takes
  // them, the last dimension first, a (before, after) pair per dimension;
  // `scalar` the constant mode's fill value.
  uint8_t pad_mode = 0;
  bool operator==(const OpAttrs&) const = default;
};

// Ops id-ed by their position in topological order; op 0 is the input batch,
// the last op is the loss.
using OpIds = SmallVec<int, 2>;       // inputs and saved tensors: one or two for nearly every op
using Shape = SmallVec<int64_t, 3>;   // (rows, features), (batch, seq, features)

// The fields are ordered so that the struct packs: a model may hold millions.
struct Op {
  OpKind kind = OpKind::Input;
  DType dtype = DType::F32;
  Activation act = Activation::None;  // Dense only
  bool simulate_only = false;         // no kernel can run it
  // Derived by op_rules (never read from a file): whether A(v) is a view, the
  // op that owns its storage (itself unless a view), and a view's element
  // strides in that storage (what makes a reshape a view or a copy). Empty
  // for owners, which are contiguous, but an Attention's, which PyTorch lays
  // out in its q's dimension order: layout_of() gives them.
  bool view = false;
  float dropout_p = 0.0f;             // Dropout only
  int32_t storage = -1;
  std::string name;
  OpIds inputs;                // producer op ids, in argument order
  OpIds saved;                 // forward tensors its backward reads (op ids; may include itself)
  Shape shape;                 // output shape; (rows, features) for the built-in ops
  uint64_t bytes = 0;          // bytes A(v) owns: 0 for a view (it aliases another op's storage)
  uint64_t param_bytes = 0;    // weights of this op (baseline, not an activation)
  // Private saved tensors aux(v): what the backward reads that is neither an
  // input nor the output (normalisation statistics, pooling indices, dropout
  // masks, contiguous copies a matmul makes of its inputs). Live from fwd v to
  // bwd v (docs/memory-model.md).
  uint64_t aux_bytes = 0;
  double fwd_flops = 0;
  double bwd_flops = 0;
  // What most ops do not have is held out of line, one pointer each, nothing
  // at all when empty or default (copy_on_write.h): a million-op chain is
  // 176 bytes an op instead of 408.
  CopyOnWrite<std::vector<int64_t>> strides;  // a view's (see above)
  CopyOnWrite<OpAttrs> attrs;
  // Initial parameter values (e.g. ONNX initializers), in kernel order: Linear
  // and Dense {W (out,in), b}, LayerNorm {gamma, beta}. Empty: the executor
  // initialises from its seed. The arrays are shared, so copying a Model stays cheap.
  CopyOnWrite<std::vector<std::shared_ptr<const std::vector<float>>>> param_init;

  int64_t numel() const;
  // Features: the last dimension (1 for a scalar).
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
  // Bytes of the tensor's elements (shape x dtype), whoever owns them.
  uint64_t logical_bytes() const;
};

bool is_integer(DType d);

// Bytes of `numel` elements of `dtype`; throws InputError on overflow.
uint64_t tensor_bytes(std::span<const int64_t> shape, DType dtype);
inline uint64_t tensor_bytes(std::initializer_list<int64_t> shape, DType dtype) {
  return tensor_bytes(std::span<const int64_t>(shape.begin(), shape.size()), dtype);
}
inline uint64_t tensor_bytes(const Shape& shape, DType dtype) { return tensor_bytes(std::span<const int64_t>(shape), dtype); }
inline uint64_t tensor_bytes(const std::vector<int64_t>& shape, DType dtype) {
  return tensor_bytes(std::span<const int64_t>(shape), dtype);
}

}  // namespace remat
