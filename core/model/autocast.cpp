#include "core/model/autocast.h"

#include <algorithm>

#include "core/kernels/pointwise_fns.h"
#include "core/model/op_layout.h"

namespace remat {
namespace {

bool low(DType d) { return d == DType::BF16 || d == DType::F16; }

// torch's fp32 list on CUDA holds these pointwise functions (exp, log, pow,
// rsqrt, reciprocal, softplus); CPU's holds none of remat's.
bool cuda_f32_fn(uint8_t fn) {
  switch (static_cast<pw::Fn>(fn)) {
    case pw::Fn::Exp:
    case pw::Fn::Log:
    case pw::Fn::Rsqrt:
    case pw::Fn::Reciprocal:
    case pw::Fn::Softplus:
    case pw::Fn::Pow: return true;
    default: return false;
  }
}

// The widest of two floating dtypes, as torch promotes: f32 over both 16-bit
// types, and bf16 with f16 gives f32.
DType promote(DType a, DType b) {
  if (a == b) return a;
  return DType::F32;
}

// A constant operand that is a tensor (a parameter, a buffer), not a Python
// scalar: it takes part in type promotion (a 0-dim one would not, but remat's
// scalar constants have no shape).
bool tensor_constant(const Op& op) {
  switch (op.kind) {
    case OpKind::AddConst:
    case OpKind::MulConst:
    case OpKind::DivConst: return op.attrs->learned || !op.attrs->const_shape.empty();
    case OpKind::Pointwise: return op.attrs->const_at >= 0 && (op.attrs->learned || !op.attrs->const_shape.empty());
    case OpKind::Concat: return op.attrs->const_at >= 0;
    default: return false;
  }
}

// The inputs whose values op's backward reads (so autograd saves them, or
// their casts): the products' operands and the norms' input.
std::vector<int> read_inputs(OpKind k) {
  switch (k) {
    case OpKind::Linear:
    case OpKind::Dense:
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::LayerNorm:
    case OpKind::GroupNorm: return {0};
    case OpKind::MatMul: return {0, 1};
    case OpKind::Attention: return {0, 1, 2};
    default: return {};
  }
}

// Which MatMul operands the product copies (contiguous, aux) before it multiplies.
MatmulCopies matmul_operand_copies(const Op& a, const Op& b) {
  if (a.shape.size() < 2 || b.shape.size() < 2) return {};
  const std::size_t ba = a.shape.size() - 2, bb = b.shape.size() - 2, r = std::max(ba, bb);
  std::vector<int64_t> batch(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - ba ? 1 : a.shape[i - (r - ba)];
    const int64_t y = i < r - bb ? 1 : b.shape[i - (r - bb)];
    batch[i] = std::max(x, y);
  }
  return matmul_copies(a, b, batch);
}

}  // namespace

std::string_view device_name(AutocastDevice d) { return d == AutocastDevice::Cuda ? "cuda" : "cpu"; }

bool parse_autocast_device(std::string_view s, AutocastDevice& out) {
  if (s == "cpu") out = AutocastDevice::Cpu;
  else if (s == "cuda") out = AutocastDevice::Cuda;
  else return false;
  return true;
}

std::string_view policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::Lower: return "lower_precision_fp";
    case CastPolicy::F32: return "fp32";
    case CastPolicy::Promote: return "promote";
  }
  return "?";
}

bool autocast_lowers(OpKind kind) {
  switch (kind) {
    case OpKind::Linear:
    case OpKind::Dense:
    case OpKind::MatMul:
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::Attention: return true;
    default: return false;
  }
}

// The table. Both devices lower linear/addmm/mm/bmm/matmul, the convolutions
// and their transposes, and scaled_dot_product_attention; both run the
// losses in f32 (CPU: mse_loss, cross_entropy_loss, nll_loss; CUDA: mse_loss,
// nll_loss and log_softmax). CUDA's fp32 list also holds layer_norm,
// group_norm, softmax and sum (with an f32 result dtype) and exp, log, pow,
// rsqrt, reciprocal, softplus; on the CPU those run in their input's dtype.
// batch_norm, the activations, pooling, dropout, add and the views are on
// neither list on either device.
CastPolicy autocast_policy(const Op& op, AutocastDevice d) {
  if (autocast_lowers(op.kind)) return CastPolicy::Lower;
  if (op.kind == OpKind::MSELoss || op.kind == OpKind::SoftmaxCELoss) return CastPolicy::F32;  // the losses
  if (d == AutocastDevice::Cpu) return CastPolicy::Promote;
  switch (op.kind) {
    case OpKind::LayerNorm:
    case OpKind::GroupNorm:
    case OpKind::Softmax: return CastPolicy::F32;
    case OpKind::Reduce: return op.attrs->fn == static_cast<uint8_t>(pw::ReduceFn::Sum) ? CastPolicy::F32 : CastPolicy::Promote;
    case OpKind::Pointwise: return cuda_f32_fn(op.attrs->fn) ? CastPolicy::F32 : CastPolicy::Promote;
    default: return CastPolicy::Promote;
  }
}

DType autocast_dtype(const Op& op, std::span<const Op> before, DType low_dtype, AutocastDevice d) {
  if (is_integer(op.dtype)) return op.dtype;  // token ids
  if (op.kind == OpKind::Input) return DType::F32;
  if (op.kind == OpKind::Embedding) return DType::F32;  // rows of its f32 table
  switch (autocast_policy(op, d)) {
    case CastPolicy::Lower: return low_dtype;
    case CastPolicy::F32: return DType::F32;
    case CastPolicy::Promote: break;
  }
  std::optional<DType> out;
  for (const int u : op.inputs) {
    const DType t = before[static_cast<std::size_t>(u)].dtype;
    if (is_integer(t)) continue;
    out = out ? promote(*out, t) : t;
  }
  if (tensor_constant(op)) out = out ? promote(*out, DType::F32) : DType::F32;
  return out.value_or(DType::F32);
}

std::optional<DType> autocast_cast(const Op& op) {
  if (autocast_lowers(op.kind) && low(op.dtype)) return op.dtype;
  if ((op.kind == OpKind::LayerNorm || op.kind == OpKind::GroupNorm) && op.dtype == DType::F32) return DType::F32;
  return std::nullopt;
}

std::vector<CastCopy> cast_copies(const Op& op, std::span<const Op> before) {
  std::vector<CastCopy> out;
  const std::optional<DType> cast = autocast_cast(op);
  if (!cast) return out;
  const MatmulCopies mc = op.kind == OpKind::MatMul && op.inputs.size() == 2
                              ? matmul_operand_copies(before[static_cast<std::size_t>(op.inputs[0])],
                                                      before[static_cast<std::size_t>(op.inputs[1])])
                              : MatmulCopies{};
  uint64_t total = 0;
  for (const int k : read_inputs(op.kind)) {
    if (static_cast<std::size_t>(k) >= op.inputs.size()) continue;
    const int u = op.inputs[static_cast<std::size_t>(k)];
    const Op& x = before[static_cast<std::size_t>(u)];
    if (is_integer(x.dtype) || x.dtype == *cast) continue;
    if (op.kind == OpKind::MatMul && (k == 0 ? mc.a : mc.b)) continue;  // copied anyway, in the cast's dtype
    // A Linear folds an input of rank > 2 to (rows, in): one that does not
    // fold as a view is copied anyway, in the cast's dtype.
    if ((op.kind == OpKind::Linear || op.kind == OpKind::Dense) && x.shape.size() > 2 &&
        !folds_broadcast(x, std::vector<int64_t>(x.shape.begin(), x.shape.end()), {x.rows(), x.cols()}))
      continue;
    // An input given twice is cast (and saved) once.
    bool seen = false;
    for (int j = 0; j < k; ++j) seen |= op.inputs[static_cast<std::size_t>(j)] == u;
    if (seen) continue;
    out.push_back({k, *cast, 0, tensor_bytes(x.shape, *cast)});
    total += out.back().bytes;
  }
  // Placed after the kind's own aux, at the end of aux(v).
  uint64_t at = op.aux_bytes >= total ? op.aux_bytes - total : 0;
  for (CastCopy& c : out) {
    c.offset = at;
    at += c.bytes;
  }
  return out;
}

uint64_t cast_copy_bytes(const Op& op, std::span<const Op> before) {
  uint64_t b = 0;
  for (const CastCopy& c : cast_copies(op, before)) b += c.bytes;
  return b;
}

DType operand_dtype(const Op& op, std::span<const Op> before, std::size_t k) {
  const DType own = before[static_cast<std::size_t>(op.inputs[k])].dtype;
  const std::optional<DType> cast = autocast_cast(op);
  return cast && !is_integer(own) ? *cast : own;
}

}  // namespace remat
