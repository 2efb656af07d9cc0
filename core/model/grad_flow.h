// Which activations carry a gradient back to a trained parameter: PyTorch's
// requires_grad. The model's input has none (as PyTorch's example input),
// integers have none, and neither has anything computed from those alone with
// no trained parameter on the way: nn.RMSNorm applied to the input computes
// its statistics (pow, mean, add, rsqrt, the product with x) before its
// weight, and autograd records no node for those ops and saves nothing for
// them. Their backward would compute gradients that reach no parameter, from
// values nobody kept; remat runs none (schedule_run.cpp), and the pointwise
// family's saved sets follow the same rule (pointwise_needs_grad).
#pragma once
#include <span>
#include <vector>

#include "core/model/op.h"

namespace remat {

// Whether op v's output carries a gradient: v trains a parameter of its own
// (a weight, an affine norm's scale, a learned constant), or one of its inputs
// carries one. `ops` holds op v and every op before it (op ids index it).
bool carries_grad(std::span<const Op> ops, int v);
// carries_grad for every op of a whole model at once (one pass), 1 or 0 each.
std::vector<char> grad_carriers(std::span<const Op> ops);

}  // namespace remat
