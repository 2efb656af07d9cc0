// Mixed precision on the CUDA backend: bf16/f16 tensors stored in their
// dtype on the device, every kernel computing in f32 — the CPU reference's
// widening call (core/exec/mixed_call.h) with device memory and the f32
// kernels of cuda_ops.h. The casts and roundings are the CPU's, and so is
// the order of every sum but the products': those of Linear, Dense and
// MatMul run on tensor cores, cuBLAS on the 16-bit operands the call hands
// over (core/exec/gemm_path.h; docs/gpu.md#mixed-precision-on-tensor-cores),
// or with REMAT_CUDA_GEMM=f32 as f32 GEMMs of the rounded values. Either way
// every strategy gives store-all's loss and gradients bit for bit.
#pragma once
#include <cstdint>
#include <span>

#include "core/exec/mixed_call.h"
#include "gpu/backend/cuda_ops.h"

namespace remat::cuda {

// A strided input of a kernel that reads rows, copied dense first, as the CPU
// backend does (op_exec.h's dense_copy): into scratch, or into aux(v) for a
// Linear's charged copy.
void dense_input(CudaOpState& s, OpCall& c, bool backward);

void mixed_forward(CudaOpState& s, const Model& model, int v, const TensorTable& t, MixedScratch& scratch);
void mixed_backward(CudaOpState& s, const Model& model, int v, const TensorTable& t,
                    std::span<const uint8_t> accumulate, MixedScratch& scratch, float seed);

}  // namespace remat::cuda
