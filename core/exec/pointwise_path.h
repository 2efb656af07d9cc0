// Which memory-bound ops of a mixed-precision call read and write their
// bf16/f16 tensors in 16 bits on the CUDA backend, instead of the widening
// call's f32 copies (docs/gpu.md#16-bit-loads-and-stores): a pure function of
// the model and the switch, so every strategy (and every rerun) takes the
// same path op by op. The kernels compute in f32 exactly as the f32 kernels
// do and round the result once, as the widening call's narrowing does, so
// the bits are the widening call's: only the memory traffic changes. The
// CUDA backend acts on it (gpu/backend/cuda_ops.cpp); the CPU checks the
// plumbing with CpuBackend::set_pointwise_mode.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/model/model.h"

namespace remat {

// REMAT_CUDA_POINTWISE: Direct (unset, or "16bit"): the kernels of
// lowp_io's ops load and store the tensors' own dtypes; F32 ("f32"): every
// op of a mixed call runs on widened f32 copies (the path before, for bisecting).
enum class PointwiseMode : uint8_t { Direct, F32 };
std::string_view pointwise_mode_name(PointwiseMode m);  // "16bit", "f32"
bool parse_pointwise_mode(std::string_view s, PointwiseMode& out);
// The environment's choice; a value other than the two throws InputError
// naming REMAT_CUDA_POINTWISE and the value.
PointwiseMode pointwise_mode_from_env();

// True when op v's pass reads its inputs (and in the backward its output
// and G(v)) as stored and writes its result into its stored dtype directly
// under `mode`: an op the mixed call runs (runs_mixed) that autocast does not
// lower, of the kinds with such kernels — the activations (ReLU, GELU, Tanh,
// Sigmoid, SiLU), Add, Dropout, Softmax, MulConst/DivConst/AddConst with a
// fixed constant, MaskedFill, BatchNorm, SoftmaxCELoss (its backward not in
// a model with f16 tensors: the loss scale multiplies that gradient before
// its rounding) — whose inputs are distinct, floating and laid out row-major
// (no strided view: the kernels read elements in order); the pointwise
// family and a Reshape's copy, which read through strides; and the fused
// Attention (autocast lowers it, but it runs no product of lowp_gemm) where
// q, k, v are distinct tensors of its own bf16/f16 dtype, read through
// their strides (autocast casts none of them), its logsumexp f32 as before.
bool lowp_io(const Model& m, int v, bool backward, PointwiseMode mode);

// What `remat run` reports for a model on the CUDA backend: the ops whose
// call widens (runs_mixed) and that the product and convolution lines do
// not report (not lowered by autocast, or the fused Attention) and, of
// those, the ones whose forward loads and stores 16 bits under `mode`.
struct PointwisePathCount {
  int widening = 0;
  int direct = 0;
};
PointwisePathCount count_pointwise_paths(const Model& m, PointwiseMode mode);

// One tensor as a lowp_io kernel reads or writes it: its pointer (at the
// tensor's first element, in its stored dtype), that dtype (F32, BF16 or
// F16) and, for a gradient, whether the result is added (the widening call's
// add_stored: the f32 sum of the stored value and the rounded result,
// rounded once) or stored (rounded once).
struct IoTensor {
  void* p = nullptr;
  DType dtype = DType::F32;
  bool add = false;
};
// The tensors a mixed call hands the backend for an op where lowp_io holds:
// in[k] A of input k (null where the pass does not hold it), out A(v) (the
// forward's result; in the backward, A(v) as its derivative reads it), dy
// G(v), dx[k] G of input k (null: none wanted).
struct IoOperands {
  bool active = false;
  IoTensor in[3];
  IoTensor out;
  IoTensor dy;
  IoTensor dx[3];
};

}  // namespace remat
