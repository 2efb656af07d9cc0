// A model: the DAG of forward ops in topological order, held in a Boost.Graph
// adjacency list so that graph algorithms (articulation points, Graphviz) work
// on it directly. Op 0 is the input batch; the last op is the loss.
#pragma once
#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

#include "core/op.h"

namespace remat {

struct Model {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Op>;

  std::string name;

  // Appends an op whose inputs are earlier ops; derives its shape, bytes, costs
  // and saved set (op_rules.h). `where` names it in error messages.
  int add(Op op, const std::string& where = {}, bool explicit_saved = false);
  // Checks the whole graph (one input first, one loss last, every op reaches
  // the loss) and builds consumer lists. Throws InputError.
  void finalize();

  int size() const { return static_cast<int>(boost::num_vertices(graph_)); }
  const Op& op(int v) const { return graph_[static_cast<std::size_t>(v)]; }
  Op& mutable_op(int v) { return graph_[static_cast<std::size_t>(v)]; }
  const std::vector<int>& consumers(int v) const { return consumers_[static_cast<std::size_t>(v)]; }
  const Graph& graph() const { return graph_; }
  int loss() const { return size() - 1; }

  // Every op but the input has a backward step and, when its output is
  // differentiable (not integer), a gradient tensor G(v); the loss's G is the
  // implicit seed 1 and takes no memory. A view's gradient is a tensor of its
  // own (sized like the view), not an alias.
  bool has_grad_tensor(int v) const { return v != 0 && v != loss() && !is_integer(op(v).dtype); }
  uint64_t grad_bytes(int v) const {
    return has_grad_tensor(v) ? (op(v).view ? op(v).logical_bytes() : op(v).bytes) : 0;
  }
  // The op owning A(v)'s storage: v itself, or the op a view aliases.
  int storage(int v) const { return op(v).storage; }
  // Bytes of the tensors some backward reads, resident when the forward pass of
  // store-all ends: every storage a saved set names (once, however many views
  // of it are saved) plus every aux(v). What PyTorch's saved_tensors_hooks count
  // (unique storages; parameters, target and labels excluded).
  uint64_t saved_bytes() const;

  uint64_t param_bytes() const;
  double forward_flops() const;   // one forward pass, input excluded
  double backward_flops() const;  // one backward pass
  bool executable() const;        // every op runnable by a backend
  // True when every activation has the same byte size (then "tensors" is a unit).
  uint64_t uniform_bytes() const;

 private:
  Graph graph_;
  std::vector<std::vector<int>> consumers_;
};

}  // namespace remat
