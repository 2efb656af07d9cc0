// Per-kind rules of the memory model: output shape, bytes, FLOPs, saved tensors
// and parameter bytes, derived from an op's kind, attributes and inputs.
#pragma once
#include "core/op.h"

namespace remat {

struct Model;

// Checks `op` against its inputs (already in `model`) and fills what the caller
// left unset: shape (for shape-preserving kinds), bytes, costs, saved, params.
// Fields the caller set explicitly (bytes > 0, costs > 0, non-empty saved) are
// kept: custom and imported ops carry their own. Throws InputError naming `where`.
void derive_op(Op& op, const Model& model, const std::string& where, bool explicit_saved);

// True for ops a backend can run (every kind but Generic, f32 only).
bool executable(const Op& op);

// Loss kinds end a model.
inline bool is_loss(OpKind k) { return k == OpKind::MSELoss || k == OpKind::SoftmaxCELoss; }

}  // namespace remat
