// A model: the DAG of forward ops in topological order. Op 0 is the input
// batch; the last op is the loss. The ops live in one array (an op's inputs,
// saved tensors and shape inside it), consumers in one compressed array, and
// graph() is a Boost.Graph view over those (core/model/model_graph.h), so graph
// algorithms and Graphviz work on the model without a copy of it. No op is
// copied or allocated for once added: building a million-op chain is a
// matter of a tenth of a second (tests/bench/commands.sh).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/op.h"

namespace remat {

class ModelGraph;

// Where a captured op came from in PyTorch (python/remat_capture): the module
// it ran in ("layer1.0.conv1", "" for the root), the aten overload
// ("aten.addmm.default"), its occurrence among that overload's calls in the
// step (`call`, from 0) and its place among the aten ops of its module
// (`place`, from 0). What a torch plan (core/io/torch_plan.h) names ops by.
// `outside`: it ran outside the module's forward (the loss function's ops).
struct TorchOrigin {
  std::string module;
  bool outside = false;
  std::string aten;  // empty: no aten op of its own (the Input; the Slice half of a select)
  int call = -1;
  int place = -1;
  bool operator==(const TorchOrigin&) const = default;
};

struct Model {
  // Op ids are packed into a 28-bit signed field in schedules (schedule.h).
  static constexpr int kMaxOps = (1 << 27) - 1;

  std::string name;
  // Per op, for a model captured from PyTorch (the file's "torch" fields);
  // empty for presets, ONNX imports and hand-written files.
  std::vector<TorchOrigin> torch_origin;

  // Room for `ops` ops, when the caller knows how many it will add.
  void reserve(int ops);
  // Appends an op whose inputs are earlier ops; derives its shape, bytes, costs
  // and saved set (op_rules.h). `where` names it in error messages (default
  // "op N").
  int add(Op op, std::string_view where = {}, bool explicit_saved = false);
  // Checks the whole graph (one input first, one loss last, every op reaches
  // the loss) and builds consumer lists. Throws InputError.
  void finalize();

  int size() const { return static_cast<int>(ops_.size()); }
  const Op& op(int v) const { return ops_[static_cast<std::size_t>(v)]; }
  std::span<const Op> ops() const { return ops_; }
  // For what add() does not derive (names, initial parameter values): the
  // model's sums below were taken as each op was added.
  Op& mutable_op(int v) { return ops_[static_cast<std::size_t>(v)]; }
  // Ops reading A(v), each once, in increasing order (after finalize()).
  std::span<const int> consumers(int v) const {
    const auto b = consumer_start_[static_cast<std::size_t>(v)], e = consumer_start_[static_cast<std::size_t>(v) + 1];
    return {consumer_list_.data() + b, static_cast<std::size_t>(e - b)};
  }
  // The model as a Boost.Graph (core/model/model_graph.h): an edge per input of
  // every op (Add(x, x) has two).
  ModelGraph graph() const;
  int loss() const { return size() - 1; }

  // Every op but the input has a backward step and, when its output is
  // differentiable (not integer), a gradient tensor G(v); the loss's G is the
  // implicit seed 1 and takes no memory. A view's gradient is sized like the
  // view (its logical bytes), whatever storage it aliases.
  bool has_grad_tensor(int v) const { return v != 0 && v != loss() && !is_integer(op(v).dtype); }
  uint64_t grad_bytes(int v) const {
    return has_grad_tensor(v) ? (op(v).view ? op(v).logical_bytes() : op(v).bytes) : 0;
  }
  // Whether bwd v hands G(v)'s storage itself to input u as u's gradient
  // (docs/memory-model.md, "An Add's gradient" and "A Reshape's gradient"), as PyTorch does:
  // - a plain Add (two different inputs): AddBackward0 returns the gradient
  //   it received, the same tensor, for both inputs; not Add(x, x), whose
  //   two halves autograd sums into a new tensor;
  // - a Reshape, view or copy: ViewBackward0 and UnsafeViewBackward0 return
  //   G(v) reshaped, a view of it, and CloneBackward0 G(v) itself. remat's
  //   gradients are dense in logical order, so G(u) is G(v)'s buffer as it is.
  // Only when u's gradient is exactly G(v)'s size and dtype.
  bool shares_grad(int v, int u) const {
    const Op& o = op(v);
    if (!has_grad_tensor(v) || !has_grad_tensor(u) || op(u).dtype != o.dtype || grad_bytes(u) != grad_bytes(v))
      return false;
    if (o.kind == OpKind::Add) return o.inputs.size() == 2 && o.inputs[0] != o.inputs[1];
    return o.kind == OpKind::Reshape;
  }
  // The op owning A(v)'s storage: v itself, or the op a view aliases.
  int storage(int v) const { return op(v).storage; }
  // Bytes of the tensors some backward reads, resident when the forward pass of
  // store-all ends: every storage a saved set names (once, however many views
  // of it are saved) plus every aux(v). What PyTorch's saved_tensors_hooks count
  // (unique storages; parameters, target and labels excluded).
  uint64_t saved_bytes() const;

  uint64_t param_bytes() const { return param_bytes_; }
  double forward_flops() const { return forward_flops_; }    // one forward pass, input excluded
  double backward_flops() const { return backward_flops_; }  // one backward pass
  // `remat run` accepts it: the executor's answer, so it is defined beside
  // run_blockers in core/exec/run_check.cpp (the model knows no kernels).
  bool executable() const;
  // The bytes of every activation when they are all the same (then "tensors"
  // is a unit), else 0.
  uint64_t uniform_bytes() const { return uniform_ ? (ops_.empty() ? 0 : ops_[0].bytes) : 0; }
  // Every op but the input reads exactly the op before it (chain:N, mlp:N).
  bool is_sequential() const { return sequential_; }

 private:
  // Summed as ops are added (in id order, as a loop over them would): a
  // million-op model is not read again for them.
  uint64_t param_bytes_ = 0;
  double forward_flops_ = 0, backward_flops_ = 0;
  bool uniform_ = true, sequential_ = true;
  std::vector<Op> ops_;
  std::vector<int32_t> consumer_start_;  // consumers of v: consumer_list_[start[v], start[v+1])
  std::vector<int32_t> consumer_list_;
};

}  // namespace remat
