// Mixed precision on the CUDA backend: bf16/f16 tensors stored in their
// dtype on the device, every kernel computing in f32 — the CPU reference's
// widening call (core/exec/mixed_call.h) with device memory and the f32
// kernels of cuda_ops.h. The casts, roundings and the order of the sums are
// the CPU's, so every strategy gives store-all's loss and gradients bit for
// bit here too; the products run as f32 GEMMs of bf16/f16-rounded values
// (exact products, f32 sums), not yet as tensor-core GEMMs on 16-bit operands.
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
