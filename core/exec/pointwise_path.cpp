#include "core/exec/pointwise_path.h"

#include <algorithm>
#include <string>

#include "core/base/env_switch.h"
#include "core/exec/op_exec.h"
#include "core/exec/view_geom.h"
#include "core/model/op_layout.h"
#include "core/model/autocast.h"

namespace remat {

std::string_view pointwise_mode_name(PointwiseMode m) { return m == PointwiseMode::F32 ? "f32" : "16bit"; }

bool parse_pointwise_mode(std::string_view s, PointwiseMode& out) {
  if (s == "16bit") out = PointwiseMode::Direct;
  else if (s == "f32") out = PointwiseMode::F32;
  else return false;
  return true;
}

PointwiseMode pointwise_mode_from_env() {
  return switch_from_env("REMAT_CUDA_POINTWISE", PointwiseMode::Direct, parse_pointwise_mode,
                         "is not a pointwise path (16bit: kernels load and store bf16/f16 tensors as stored, the "
                         "default; f32: on widened f32 copies)");
}

namespace {

bool has_io_kernels(const Op& op) {
  switch (op.kind) {
    case OpKind::ReLU:
    case OpKind::GELU:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::SiLU:
    case OpKind::Add:
    case OpKind::Dropout:
    case OpKind::Softmax:
    case OpKind::MaskedFill:
    case OpKind::BatchNorm:
    case OpKind::SoftmaxCELoss:
    case OpKind::Attention: return true;
    case OpKind::Reshape: return !op.view;  // a copy of a strided input
    case OpKind::Pointwise:
    case OpKind::MulConst:
    case OpKind::DivConst:
    case OpKind::AddConst: return !op.attrs->learned;  // a learned one's parameter gradient sums f32 G
    default: return false;
  }
}

bool io_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
bool low(DType d) { return d == DType::BF16 || d == DType::F16; }

// Whether op v reads or writes a bf16/f16 storage: cpu_mixed.h's runs_mixed,
// which this module cannot include (cpu_mixed.h includes mixed_call.h, which
// includes this header); the tests check that the two agree on the presets.
bool widens(const Model& m, int v) {
  const Op& op = m.op(v);
  if (low(op.dtype) || low(m.op(op.storage).dtype)) return true;
  return std::any_of(op.inputs.begin(), op.inputs.end(), [&](int u) { return low(m.op(m.op(u).storage).dtype); });
}

// The ops the GEMM and convolution reports leave to this one: those autocast
// does not lower, and the fused attention, which it lowers (q, k, v cast,
// the output in the low dtype) but which runs no product of lowp_gemm.
bool reported_here(OpKind k) { return !autocast_lowers(k) || k == OpKind::Attention; }

// The fused attention's kernels (gpu/kernels/sdpa.cu) read q, k, v and A(v)
// through their strides, G(v) contiguous, and store the input gradients
// contiguous; the logsumexp stays f32 in aux. They take the tensors as
// stored where autocast casts none of q, k, v (each of the op's own 16-bit
// dtype: no copies in aux to make or read) and the three are distinct (q = k
// = v sums its three gradients in f32 before one rounding).
bool attention_io(const Model& m, int v) {
  const Op& op = m.op(v);
  if (!low(op.dtype) || m.op(op.storage).dtype != op.dtype || op.inputs.size() != 3 || op.numel() == 0) return false;
  for (const int u : op.inputs) {
    if (m.op(u).dtype != op.dtype || m.op(m.op(u).storage).dtype != op.dtype) return false;
    if (std::count(op.inputs.begin(), op.inputs.end(), u) > 1) return false;
  }
  return true;
}

}  // namespace

bool lowp_io(const Model& m, int v, bool backward, PointwiseMode mode) {
  if (mode != PointwiseMode::Direct) return false;
  const Op& op = m.op(v);
  if (op.view || !has_io_kernels(op) || !reported_here(op.kind) || !widens(m, v)) return false;
  if (op.kind == OpKind::Attention) return attention_io(m, v);
  // An f16 model's loss scale multiplies the loss's input gradient before
  // it is rounded (the widening call's seed): that backward stays widened.
  if (backward && is_loss(op.kind) &&
      std::any_of(m.ops().begin(), m.ops().end(), [](const Op& o) { return o.dtype == DType::F16; }))
    return false;
  if (!io_dtype(op.dtype) || !io_dtype(m.op(op.storage).dtype) || op.inputs.size() > 3) return false;
  for (std::size_t k = 0; k < op.inputs.size(); ++k) {
    const int u = op.inputs[k];
    if (!io_dtype(m.op(u).dtype) || !io_dtype(m.op(m.op(u).storage).dtype)) return false;
    if (std::count(op.inputs.begin(), op.inputs.end(), u) > 1) return false;  // both terms summed in f32 first
    if (op.kind == OpKind::Pointwise) continue;  // read through its geometry: a broadcast operand is its own size
    if (!is_loss(op.kind) && m.op(u).numel() != op.numel()) return false;  // the kernels read n elements each
  }
  // The pointwise family and a Reshape's copy read their operands through
  // their strides, as stored (the other kinds' kernels read n elements in a
  // row). An empty op's broadcast gradient is zeros, which the widening call stores.
  if (op.kind == OpKind::Reshape) {  // its copy on the pointwise kernels: rank 8 at most once coalesced
    const Op& x = m.op(op.inputs[0]);
    cpu::PwGeom g;
    return op.numel() > 0 &&
           copy_geom(coalesced(ViewMap{std::vector<int64_t>(x.shape.begin(), x.shape.end()), layout_of(x), 0}), g);
  }
  if (op.kind == OpKind::Pointwise) return op.numel() > 0 && dense_copy(m, v) == DenseCopy::None;
  return !reads_strided(m, v);
}

PointwisePathCount count_pointwise_paths(const Model& m, PointwiseMode mode) {
  PointwisePathCount c;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    if (op.kind == OpKind::Input || op.view || !reported_here(op.kind) || !widens(m, v)) continue;
    ++c.widening;
    c.direct += lowp_io(m, v, false, mode);
  }
  return c;
}

}  // namespace remat
