// Mixed precision on the CPU reference (docs/memory-model.md#mixed-precision-autocast):
// a bf16/f16 tensor is stored in its dtype and every kernel computes in f32.
// An op that touches one runs through a widening wrapper around the f32
// kernels: the storages it reads are widened into f32 scratch, its output
// and input gradients are computed in f32 scratch and rounded (to nearest,
// ties to even: core/kernels/convert.h) into their dtype. Where autocast
// runs an op in low precision (autocast_lowers), its f32 inputs and its
// weights are rounded to the op's dtype first, and its weight gradients
// (autocast's bf16 copy's) before they are added to the f32 gradients: the
// f32 master weights and gradients stay the backend's baseline.
//
// An input gradient is computed on its own and rounded before it is added to
// an earlier one, as autograd sums two bf16 gradients; the order is the
// schedule's backward order, the same for every strategy, so recomputation
// stays bitwise identical. Pure f32 ops never come here (runs_mixed).
#pragma once
#include <cstdint>
#include <span>

#include "core/exec/cpu_ops.h"
#include "core/exec/mixed_call.h"
#include "core/model/autocast.h"

namespace remat {

// The kinds autocast runs in its low-precision dtype (core/model/autocast.h's
// autocast_lowers: linear, matmul, convolutions, attention) cast their inputs
// and weights to it. The rest compute in f32 from what their inputs hold and
// round only their result to their own dtype. Where autograd keeps the cast
// of an input rather than the input (autocast.h's cast_copies), the forward
// writes it into aux(v) and the backward reads the input from there.
// Whether op v reads or writes a bf16/f16 tensor, or autocast lowers it.
bool runs_mixed(const Model& model, int v);

void mixed_forward(CpuOpState& s, const Model& model, int v, const TensorTable& t, MixedScratch& scratch);
// `seed` multiplies the input gradients before they are rounded: the loss
// scale at the loss (a power of two, so exact unless it overflows, as the
// scaled backward of GradScaler would).
void mixed_backward(CpuOpState& s, const Model& model, int v, const TensorTable& t,
                    std::span<const uint8_t> accumulate, MixedScratch& scratch, float seed = 1.0f);

// GradScaler's initial scale, 2^16, which a model with f16 tensors runs with
// (bf16 has f32's range and needs none).
constexpr float kF16LossScale = 65536.0f;
bool uses_f16(const Model& model);

}  // namespace remat
