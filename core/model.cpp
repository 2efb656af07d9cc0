#include "core/model.h"

#include "core/errors.h"
#include "core/op_rules.h"

namespace remat {

int Model::add(Op op, const std::string& where, bool explicit_saved) {
  const int id = size();
  const std::string at = where.empty() ? "op " + std::to_string(id) : where;
  for (int in : op.inputs) {
    if (in < 0 || in >= id)
      throw InputError(at + ": input " + std::to_string(in) +
                       " is not an earlier op (ops must be in topological order)");
  }
  derive_op(op, *this, at, explicit_saved);
  const auto v = boost::add_vertex(op, graph_);
  for (int in : op.inputs) boost::add_edge(static_cast<std::size_t>(in), v, graph_);
  return id;
}

void Model::finalize() {
  const int n = size();
  if (n < 2) throw InputError("model '" + name + "' needs an input and a loss (has " + std::to_string(n) + " ops)");
  if (op(0).kind != OpKind::Input) throw InputError("op 0 must be the Input");
  for (int v = 1; v < n; ++v) {
    if (op(v).kind == OpKind::Input) throw InputError("op " + std::to_string(v) + ": only op 0 may be an Input");
  }
  if (!is_loss(op(n - 1).kind) && op(n - 1).kind != OpKind::Generic)
    throw InputError("the last op (" + std::to_string(n - 1) + ") must be a loss, not " +
                     std::string(kind_name(op(n - 1).kind)));
  consumers_.assign(static_cast<std::size_t>(n), {});
  for (int v = 0; v < n; ++v) {
    for (int in : op(v).inputs) {
      auto& c = consumers_[static_cast<std::size_t>(in)];
      if (c.empty() || c.back() != v) c.push_back(v);
    }
  }
  for (int v = 0; v < n - 1; ++v) {
    if (consumers_[static_cast<std::size_t>(v)].empty())
      throw InputError("op " + std::to_string(v) + " ('" + op(v).name +
                       "') is never used: every op must lead to the loss");
  }
}

uint64_t Model::saved_bytes() const {
  std::vector<uint8_t> held(static_cast<std::size_t>(size()), 0);
  uint64_t b = 0;
  for (int v = 0; v < size(); ++v) {
    b += op(v).aux_bytes;
    for (int s : op(v).saved) {
      const auto r = static_cast<std::size_t>(storage(s));
      if (!held[r]) b += op(static_cast<int>(r)).bytes;
      held[r] = 1;
    }
  }
  return b;
}

uint64_t Model::param_bytes() const {
  uint64_t b = 0;
  for (int v = 0; v < size(); ++v) b += op(v).param_bytes;
  return b;
}

double Model::forward_flops() const {
  double f = 0;
  for (int v = 1; v < size(); ++v) f += op(v).fwd_flops;
  return f;
}

double Model::backward_flops() const {
  double f = 0;
  for (int v = 1; v < size(); ++v) f += op(v).bwd_flops;
  return f;
}

bool Model::executable() const {
  for (int v = 0; v < size(); ++v) {
    if (!remat::executable(op(v))) return false;
  }
  return true;
}

uint64_t Model::uniform_bytes() const {
  if (size() == 0) return 0;
  const uint64_t b = op(0).bytes;
  for (int v = 1; v < size(); ++v) {
    if (op(v).bytes != b) return 0;
  }
  return b;
}

}  // namespace remat
