#include "core/exec/gemm_path.h"

#include <string>

#include "core/base/env_switch.h"
#include "core/exec/op_exec.h"
#include "core/model/autocast.h"

namespace remat {

std::string_view gemm_mode_name(GemmMode m) { return m == GemmMode::F32 ? "f32" : "tensor"; }

bool parse_gemm_mode(std::string_view s, GemmMode& out) {
  if (s == "tensor") out = GemmMode::TensorCore;
  else if (s == "f32") out = GemmMode::F32;
  else return false;
  return true;
}

GemmMode gemm_mode_from_env() {
  return switch_from_env("REMAT_CUDA_GEMM", GemmMode::TensorCore, parse_gemm_mode,
                         "is not a GEMM path (tensor: tensor cores on 16-bit operands, the default; f32: f32 GEMMs)");
}

GemmMode conv_mode_from_env() {
  return switch_from_env("REMAT_CUDA_CONV", GemmMode::TensorCore, parse_gemm_mode,
                         "is not a convolution path (tensor: cuDNN on 16-bit operands with tensor-op math, the "
                         "default; f32: f32 convolutions)");
}

bool lowp_conv(const Model& m, int v, bool /*backward: both passes alike*/, GemmMode mode) {
  if (mode != GemmMode::TensorCore) return false;
  const Op& op = m.op(v);
  if (op.kind != OpKind::Conv || (op.dtype != DType::BF16 && op.dtype != DType::F16)) return false;
  return op.inputs.size() == 1 && !is_integer(m.op(op.inputs[0]).dtype);
}

bool lowp_call(const Model& m, int v, bool backward, GemmMode gemm, GemmMode conv) {
  return m.op(v).kind == OpKind::Conv ? lowp_conv(m, v, backward, conv) : lowp_gemm(m, v, backward, gemm);
}

bool lowp_gemm(const Model& m, int v, bool backward, GemmMode mode) {
  if (mode != GemmMode::TensorCore) return false;
  const Op& op = m.op(v);
  if (op.dtype != DType::BF16 && op.dtype != DType::F16) return false;
  if (op.kind == OpKind::MatMul) {
    if (op.inputs.size() != 2 || is_integer(m.op(op.inputs[0]).dtype) || is_integer(m.op(op.inputs[1]).dtype))
      return false;
    const MatmulDims d = matmul_dims(m, v);
    return !d.scratch_a && !d.scratch_b;
  }
  if (op.kind != OpKind::Linear && op.kind != OpKind::Dense) return false;
  if (op.inputs.size() != 1 || is_integer(m.op(op.inputs[0]).dtype)) return false;
  if (dense_copy(m, v) != DenseCopy::None) return false;
  if (backward && op.kind == OpKind::Dense && op.act != Activation::None) return false;
  return true;
}

bool gemm_reads_16_bits_only(const Model& m, int v, std::size_t k, bool backward) {
  const Op& op = m.op(v);
  if (op.kind == OpKind::Linear || op.kind == OpKind::Dense || op.kind == OpKind::Conv) return k == 0;
  if (op.kind != OpKind::MatMul || k > 1) return false;
  if (backward) return true;
  const MatmulDims d = matmul_dims(m, v);
  return !(k == 0 ? d.aux_a : d.aux_b);
}

GemmPathCount count_gemm_paths(const Model& m, GemmMode mode) {
  GemmPathCount c;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    // The products this report covers; autocast lowers the convolutions and
    // the fused attention too, which count_conv_paths and the pointwise
    // report count (a ResNet's 53 convolutions are not "f32 GEMMs").
    const bool product = op.kind == OpKind::Linear || op.kind == OpKind::Dense || op.kind == OpKind::MatMul;
    c.lowered += product && (op.dtype == DType::BF16 || op.dtype == DType::F16);
    c.tensor_core += lowp_gemm(m, v, false, mode);
  }
  return c;
}

GemmPathCount count_conv_paths(const Model& m, GemmMode mode) {
  GemmPathCount c;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    c.lowered += (op.kind == OpKind::Conv || op.kind == OpKind::ConvTranspose) &&
                 (op.dtype == DType::BF16 || op.dtype == DType::F16);
    c.tensor_core += lowp_conv(m, v, false, mode);
  }
  return c;
}

}  // namespace remat
