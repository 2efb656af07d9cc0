// Which products of a mixed-precision call run as tensor-core GEMMs on 16-bit
// operands (docs/gpu.md#mixed-precision-on-tensor-cores): a pure function of
// the model and the switch, so every strategy (and every rerun) of a model
// takes the same path op by op. The CUDA backend acts on it
// (gpu/backend/cuda_mixed.cpp); the CPU never does (its products are exact
// f32 products of the rounded values, summed in f32).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/model.h"

namespace remat {

// REMAT_CUDA_GEMM: how the CUDA backend runs the products of the ops autocast
// computes in bf16/f16. TensorCore (unset, or "tensor"): cuBLAS GEMMs on the
// 16-bit operands, f32 accumulation and output; F32 ("f32"): the f32 GEMMs of
// the widened, rounded operands (exact products, f32 sums: the CPU's path).
enum class GemmMode : uint8_t { TensorCore, F32 };
std::string_view gemm_mode_name(GemmMode m);  // "tensor", "f32"
bool parse_gemm_mode(std::string_view s, GemmMode& out);
// The environment's choice; a value other than the two throws InputError
// naming REMAT_CUDA_GEMM and the value.
GemmMode gemm_mode_from_env();

// True when op v's products in that pass read 16-bit operands under `mode`:
// a Linear, Dense or MatMul whose dtype is bf16/f16 (autocast lowers it:
// inputs and weight cast to that dtype) with floating inputs, each read in
// place or from a copy in aux(v), never from an f32 gather: a Linear's or
// Dense's input without a dense copy (op_exec.h's dense_copy is None), a
// MatMul's operands folded or copied to aux (matmul_dims: no scratch_a/b).
// The backward of a Dense with an activation stays f32: its pre-activation
// gradient exists only as f32 values, not as 16-bit ones. Everything else
// (the f32 mode, f32 ops, convolutions, attention) runs f32 GEMMs.
bool lowp_gemm(const Model& m, int v, bool backward, GemmMode mode);

// REMAT_CUDA_CONV: the same choice for the convolutions of those ops
// (GemmMode's values and names): TensorCore (unset, or "tensor"): cuDNN on
// the 16-bit operands (bf16/f16 tensors and filters, f32 compute, tensor-op
// math, deterministic algorithms), its 16-bit results widened for what
// follows; F32 ("f32"): cuDNN's f32 convolutions of the widened, rounded
// operands (the CPU's path). A separate switch from REMAT_CUDA_GEMM, so that
// a device run can take either path alone. A bad value throws InputError
// naming REMAT_CUDA_CONV and the value.
GemmMode conv_mode_from_env();

// True when op v's convolution in that pass runs on cuDNN's 16-bit path
// under `mode`: a Conv whose dtype is bf16/f16 (autocast lowers it: input
// and weight cast to that dtype) with a floating input. Its forward writes
// the output in the dtype (cuDNN's legacy API takes one data type for x, w
// and y), widened into the f32 output for the bias; its backward writes the
// input and weight gradients in the dtype, widened for the f32 rounding and
// accumulation that follow. A ConvTranspose stays f32 (its forward is a
// backward-data pass, its input gradient added into another reader's).
bool lowp_conv(const Model& m, int v, bool backward, GemmMode mode);

// lowp_gemm or lowp_conv under their own switches: the mixed call's one test.
bool lowp_call(const Model& m, int v, bool backward, GemmMode gemm, GemmMode conv);

// Where lowp_gemm holds: whether the pass reads input k in 16 bits only, so
// that the mixed call need not widen it (it still takes the f32 scratch:
// the bytes measured stay the f32 path's). A Linear's or Dense's input, a
// MatMul's operands in the backward, and in the forward those it reads in
// place; a Conv's input (lowp_conv) likewise (an operand copied to aux is made from its f32 widening first, and
// so is autocast's cast of an f32 input: the mixed call widens those).
bool gemm_reads_16_bits_only(const Model& m, int v, std::size_t k, bool backward);

// What `remat run` reports for a model on the CUDA backend: the ops whose
// products autocast computes in bf16/f16 (autocast_lowers, a low dtype) and,
// of those, the ones whose forward runs on tensor cores under `mode`.
struct GemmPathCount {
  int lowered = 0;
  int tensor_core = 0;
};
GemmPathCount count_gemm_paths(const Model& m, GemmMode mode);
// The same for convolutions: `lowered` counts the Conv and ConvTranspose ops
// in bf16/f16, `tensor_core` those where lowp_conv holds under `mode`.
GemmPathCount count_conv_paths(const Model& m, GemmMode mode);

// The 16-bit operands a mixed call hands the backend for an op where
// lowp_gemm holds, in `dtype`: the input x (a Linear's (rows, in), a
// MatMul's left operand) and x1 (a MatMul's right one), each where the
// kernel reads it: in place, or in aux(v) (autocast's cast, or a MatMul's
// operand copy, which the forward's kernel narrows there from its f32 copy
// before the product); the weight W (out, in); in the backward G(v).
// A Conv's (lowp_conv) x and W likewise (W (k, c/groups, r, s)), and where
// cuDNN writes its 16-bit results before they are widened into the f32
// buffers the call reads: y, the forward's output, is A(v)'s own storage
// (its final place: the f32 output is narrowed back into it after the bias);
// dx, the backward's input gradient, is the f32 scratch the call took for
// the input and left unwidened (the input is read in 16 bits; twice the
// bytes dx needs). The weight gradient's 16-bit staging is the backend's.
struct LowpOperands {
  DType dtype = DType::F32;  // F32: none (the f32 kernels run)
  void* x = nullptr;
  void* x1 = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;   // a Conv's forward: where its 16-bit output goes
  bool y_final = false;  // ... and y is A(v) as stored: no f32 output wanted (a Conv without bias)
  void* dx = nullptr;  // a Conv's backward: where its 16-bit input gradient goes (null: none wanted)
  bool active() const { return dtype != DType::F32; }
};

}  // namespace remat
