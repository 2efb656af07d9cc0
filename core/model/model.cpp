#include "core/model/model.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/base/prefault.h"
#include "core/model/op_rules.h"

namespace remat {

void Model::reserve(int ops) { reserve_prefaulted(ops_, static_cast<std::size_t>(ops)); }

int Model::add(Op op, std::string_view where, bool explicit_saved) {
  const int id = size();
  // Only an error message reads the op's label: it is made then, not per op.
  auto at = [&] { return where_label(where, id); };
  if (id >= kMaxOps) throw InputError(at() + ": a model holds at most " + std::to_string(kMaxOps) + " ops");
  for (int in : op.inputs) {
    if (in < 0 || in >= id)
      throw InputError(at() + ": input " + std::to_string(in) +
                       " is not an earlier op (ops must be in topological order)");
  }
  derive_op(op, ops_, where, explicit_saved);
  param_bytes_ += op.param_bytes;
  if (id > 0) {
    forward_flops_ += op.fwd_flops;
    backward_flops_ += op.bwd_flops;
    sequential_ = sequential_ && op.inputs.size() == 1 && op.inputs[0] == id - 1;
  }
  uniform_ = uniform_ && (id == 0 || op.bytes == ops_[0].bytes);
  ops_.push_back(std::move(op));
  return id;
}

void Model::finalize() {
  const int n = size();
  if (n < 2) throw InputError("model '" + name + "' needs an input and a loss (has " + std::to_string(n) + " ops)");
  if (op(0).kind != OpKind::Input) throw InputError("op 0 must be the Input");
  // Consumers in compressed rows: count, prefix sums, fill. Ops come in
  // increasing order, so each row is sorted; a repeated input (Add(x, x)) is
  // an earlier slot of the same op and is entered once. No per-op scratch
  // array: the fill advances each row's start to the next row's, and one
  // shift puts them back.
  reserve_prefaulted(consumer_start_, static_cast<std::size_t>(n) + 1);
  consumer_start_.assign(static_cast<std::size_t>(n) + 1, 0);
  auto first_time = [](const OpIds& in, std::size_t k) {
    return std::find(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(k), in[k]) == in.begin() + static_cast<std::ptrdiff_t>(k);
  };
  for (int v = 0; v < n; ++v) {
    if (v > 0 && op(v).kind == OpKind::Input) throw InputError("op " + std::to_string(v) + ": only op 0 may be an Input");
    const OpIds& in = op(v).inputs;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (first_time(in, k)) ++consumer_start_[static_cast<std::size_t>(in[k]) + 1];
  }
  if (!is_loss(op(n - 1).kind) && op(n - 1).kind != OpKind::Generic)
    throw InputError("the last op (" + std::to_string(n - 1) + ") must be a loss, not " +
                     std::string(kind_name(op(n - 1).kind)));
  for (std::size_t v = 0; v < static_cast<std::size_t>(n); ++v) consumer_start_[v + 1] += consumer_start_[v];
  reserve_prefaulted(consumer_list_, static_cast<std::size_t>(consumer_start_.back()));
  consumer_list_.resize(static_cast<std::size_t>(consumer_start_.back()));
  for (int v = 0; v < n; ++v) {
    const OpIds& in = op(v).inputs;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (first_time(in, k)) consumer_list_[static_cast<std::size_t>(consumer_start_[static_cast<std::size_t>(in[k])]++)] = v;
  }
  // start[u] now holds the end of row u, the start of row u + 1.
  for (std::size_t u = static_cast<std::size_t>(n); u > 0; --u) consumer_start_[u] = consumer_start_[u - 1];
  consumer_start_[0] = 0;
  for (int v = 0; v < n - 1; ++v) {
    if (consumers(v).empty())
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


}  // namespace remat
