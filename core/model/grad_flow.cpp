#include "core/model/grad_flow.h"

#include <unordered_set>
#include <vector>

namespace remat {
namespace {

// The kinds whose constant may be fixed (a buffer, a mask: baseline bytes in
// param_bytes, no gradient) or learned; every other kind with parameter bytes
// trains them (a BatchNorm without affine holds only its running statistics).
bool trains(const Op& op) {
  switch (op.kind) {
    case OpKind::AddConst:
    case OpKind::MulConst:
    case OpKind::DivConst:
    case OpKind::MaskedFill:
    case OpKind::Pointwise:
    case OpKind::Concat: return op.attrs->learned;
    case OpKind::BatchNorm: return op.attrs->affine;
    default: return op.param_bytes > 0;
  }
}

bool never_carries(const Op& op) { return op.kind == OpKind::Input || is_integer(op.dtype); }

}  // namespace

// A walk back from v that stops at the first op training a parameter: in a
// model with parameters that is a few ops away (the Linear before a norm, the
// branch of a residual Add), so the walk stays short; it covers the whole
// cone of ancestors only where the answer is no, and that cone is what lies
// between the input and the first parameter.
bool carries_grad(std::span<const Op> ops, int v) {
  const auto at = [&](int u) -> const Op& { return ops[static_cast<std::size_t>(u)]; };
  if (never_carries(at(v))) return false;
  if (trains(at(v))) return true;
  std::vector<int> todo{v};
  std::unordered_set<int> seen{v};
  while (!todo.empty()) {
    const Op& op = at(todo.back());
    todo.pop_back();
    for (const int u : op.inputs) {
      if (!seen.insert(u).second) continue;
      if (never_carries(at(u))) continue;
      if (trains(at(u))) return true;
      todo.push_back(u);
    }
  }
  return false;
}

std::vector<char> grad_carriers(std::span<const Op> ops) {
  std::vector<char> out(ops.size(), 0);
  for (std::size_t v = 0; v < ops.size(); ++v) {
    const Op& op = ops[v];
    if (never_carries(op)) continue;
    bool c = trains(op);
    for (const int u : op.inputs) c = c || out[static_cast<std::size_t>(u)];
    out[v] = c;
  }
  return out;
}

}  // namespace remat
