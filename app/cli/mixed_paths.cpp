#include "app/cli/mixed_paths.h"

#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"

namespace remat {
namespace {

using json = nlohmann::json;

// Which GEMM path ran a model's bf16/f16 products (REMAT_CUDA_GEMM).
MixedPathReport gemm_report(const Model& model) {
  MixedPathReport r{"cuda_gemm", "", nullptr};
  if (count_gemm_paths(model, GemmMode::F32).lowered == 0) return r;
  const GemmMode mode = gemm_mode_from_env();
  const GemmPathCount c = count_gemm_paths(model, mode);
  r.line = mode == GemmMode::F32
               ? "bf16/f16 products: f32 GEMMs of the rounded values for all " + std::to_string(c.lowered) +
                     " lowered ops (REMAT_CUDA_GEMM=f32)"
               : "bf16/f16 products: tensor cores (16-bit operands, f32 sums) for " + std::to_string(c.tensor_core) +
                     " of the " + std::to_string(c.lowered) +
                     " lowered ops (Linear, Dense, MatMul), f32 GEMMs for the rest; REMAT_CUDA_GEMM=f32 runs all as "
                     "f32 GEMMs";
  r.json = {{"path", std::string(gemm_mode_name(mode))}, {"lowered_ops", c.lowered}, {"tensor_core_ops", c.tensor_core}};
  return r;
}

// The same for its bf16/f16 convolutions (REMAT_CUDA_CONV). A build or device
// where cuDNN does not run takes the f32 path whatever the switch says
// (docs/gpu.md).
MixedPathReport conv_report(const Model& model) {
  MixedPathReport r{"cuda_conv", "", nullptr};
  if (count_conv_paths(model, GemmMode::F32).lowered == 0) return r;
  const GemmMode mode = conv_mode_from_env();
  const GemmPathCount c = count_conv_paths(model, mode);
  r.line = mode == GemmMode::F32
               ? "bf16/f16 convolutions: f32 cuDNN convolutions of the rounded values for all " +
                     std::to_string(c.lowered) + " (REMAT_CUDA_CONV=f32)"
               : "bf16/f16 convolutions: cuDNN on 16-bit tensors (f32 compute, tensor-op math, deterministic "
                 "algorithms) for " +
                     std::to_string(c.tensor_core) + " of the " + std::to_string(c.lowered) +
                     " (Conv; a ConvTranspose runs in f32); REMAT_CUDA_CONV=f32 runs all in f32";
  r.json = {{"path", std::string(gemm_mode_name(mode))}, {"lowered_ops", c.lowered}, {"tensor_core_ops", c.tensor_core}};
  return r;
}

// How many of the ops that widen load and store their tensors as stored
// (REMAT_CUDA_POINTWISE).
MixedPathReport pointwise_report(const Model& model) {
  MixedPathReport r{"cuda_pointwise", "", nullptr};
  if (count_pointwise_paths(model, PointwiseMode::F32).widening == 0) return r;
  const PointwiseMode mode = pointwise_mode_from_env();
  const PointwisePathCount c = count_pointwise_paths(model, mode);
  const std::string n = std::to_string(c.widening);
  if (mode == PointwiseMode::F32)
    r.line = "bf16/f16 tensors of the other ops: widened to f32 copies for all " + n +
             " ops that read or write them (REMAT_CUDA_POINTWISE=f32)";
  else if (c.direct == c.widening)
    r.line = "bf16/f16 tensors of the other ops: loaded and stored as stored for all " + n +
             " ops that read or write them; REMAT_CUDA_POINTWISE=f32 widens all";
  else
    r.line = "bf16/f16 tensors of the other ops: loaded and stored as stored for " + std::to_string(c.direct) +
             " of the " + n + " ops that read or write them, widened to f32 copies for the rest; " +
             "REMAT_CUDA_POINTWISE=f32 widens all";
  r.json = {{"path", std::string(pointwise_mode_name(mode))}, {"widening_ops", c.widening}, {"direct_ops", c.direct}};
  return r;
}

}  // namespace

std::vector<MixedPathReport> mixed_path_reports(const Model& model, const std::string& backend) {
  if (backend.rfind("cuda", 0) != 0)
    return {{"cuda_gemm", "", nullptr}, {"cuda_conv", "", nullptr}, {"cuda_pointwise", "", nullptr}};
  return {gemm_report(model), conv_report(model), pointwise_report(model)};
}

}  // namespace remat
