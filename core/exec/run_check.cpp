#include "core/exec/run_check.h"

#include <algorithm>

#include "core/exec/op_exec.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/autocast.h"
#include "core/model/grad_flow.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

// Kinds whose kernels read their inputs through any strides: the views
// themselves, a copying Reshape, a MatMul (it copies such an operand, as
// PyTorch), an Attention, the pointwise family and the reductions, and a
// Concat (which copies a strided input as the family's identity), and an Add
// (the family's add through strides where an input is strided).
bool reads_strides(const Op& op) {
  switch (op.kind) {
    case OpKind::Add:
    case OpKind::Reshape:
    case OpKind::MatMul:
    case OpKind::Attention:
    case OpKind::Pointwise:
    case OpKind::Reduce:
    case OpKind::TopK:
    case OpKind::Gather:
    case OpKind::Concat: return true;
    default: return op.view;
  }
}

std::string pointwise_saved_problem(const Model& model, int v) {
  const Op& op = model.op(v);
  const PwOperands ops = pointwise_operands(op);
  const pw::FnInfo& f = pw::kFns[op.attrs->fn];
  auto kept = [&](int u) { return std::find(op.saved.begin(), op.saved.end(), u) != op.saved.end(); };
  for (int k = 0; k < ops.arity; ++k) {
    if (!pointwise_needs_grad(op, ops, k, model.ops())) continue;
    for (int j = 0; j < 3; ++j)
      if ((f.reads[k] & (1 << j)) && ops.at[j].src == PwOperand::Input &&
          !kept(op.inputs[static_cast<std::size_t>(ops.at[j].input)]))
        return "the derivative of " + std::string(f.name) + " with respect to operand " + std::to_string(k) +
               " reads operand " + std::to_string(j) + ", which its saved set leaves out";
    if ((f.reads[k] & pw::kY) && !kept(v))
      return "the derivative of " + std::string(f.name) + " reads its result, which its saved set leaves out";
  }
  return {};
}

// The activation kinds' kernels differentiate from their input (GELU, SiLU)
// or their output (ReLU, Tanh, Sigmoid): a saved set given in the file (a
// capture's, as autograd kept it) must hold that one.
// One that carries no gradient (grad_flow.h) runs no backward and reads nothing.
std::string activation_saved_problem(const Op& op, int v, bool carries_grad) {
  const bool from_input = op.kind == OpKind::GELU || op.kind == OpKind::SiLU;
  if (!from_input && op.kind != OpKind::ReLU && op.kind != OpKind::Tanh && op.kind != OpKind::Sigmoid) return {};
  if (!carries_grad) return {};
  const int needs = from_input ? op.inputs.at(0) : v;
  if (std::find(op.saved.begin(), op.saved.end(), needs) != op.saved.end()) return {};
  return std::string("its backward reads its ") + (from_input ? "input" : "result") + ", which its saved set leaves out";
}

}  // namespace

std::vector<RunBlocker> run_blockers(const Model& model, std::size_t limit) {
  std::vector<RunBlocker> out;
  const std::vector<char> carries = grad_carriers(model.ops());
  for (int v = 0; v < model.size() && out.size() < limit; ++v) {
    std::string why = exec_problem(model.op(v));
    if (why.empty() && model.op(v).kind == OpKind::Pointwise) why = pointwise_saved_problem(model, v);
    if (why.empty()) why = activation_saved_problem(model.op(v), v, carries[static_cast<std::size_t>(v)]);
    if (!why.empty()) out.push_back({v, true, std::move(why)});
  }
  const auto add = [&](int v, std::string why) {
    if (out.size() < limit) out.push_back({v, false, std::move(why)});
  };
  for (int v = 1; v < model.size() && out.size() < limit; ++v) {
    const Op& op = model.op(v);
    // Integer token ids feed an Embedding, a TopK's indices a Gather (as its
    // index) and views of them; nothing else reads integers.
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const int u = op.inputs[k];
      const bool reader = op.kind == OpKind::Embedding || (op.kind == OpKind::Gather && k == 1) || op.view;
      if (is_integer(model.op(u).dtype) && !reader) {
        add(v, op_label(model, v) + " (" + std::string(kind_name(op.kind)) + ") reads the " +
                   std::string(dtype_name(model.op(u).dtype)) + " tensor " + op_label(model, u) +
                   "; only an Embedding, a Gather's index and views read integers");
        break;
      }
    }
    // A Gather picks by indices a TopK made over no more positions than its
    // input has along the axis, so every pick is inside it.
    if (op.kind == OpKind::Gather) {
      const Op& made = model.op(model.storage(op.inputs.at(1)));
      const Op& x = model.op(op.inputs.at(0));
      const auto axis = [](int64_t a, std::size_t rank) { return static_cast<std::size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a); };
      if (made.kind != OpKind::TopK)
        add(v, op_label(model, v) + " (Gather) picks by " + op_label(model, model.storage(op.inputs.at(1))) +
                   ", which is not a TopK's indices; the kernels gather only by those");
      else if (model.op(made.inputs.at(0)).shape.at(axis(made.attrs->axis, made.shape.size())) >
               x.shape.at(axis(op.attrs->axis, x.shape.size())))
        add(v, op_label(model, v) + " (Gather) picks by indices that may lie past its input's axis");
    }
    if (target_loss_keeps_f32_input(op) && op.aux_bytes < 4 * static_cast<uint64_t>(model.op(op.inputs[0]).numel()))
      add(v, op_label(model, v) + " (" + std::string(kind_name(op.kind)) + ") keeps " + std::to_string(op.aux_bytes) +
                 " bytes of aux and not its input; its f32 copy needs " +
                 std::to_string(4 * model.op(op.inputs[0]).numel()));
    if (ce_keeps_log_probs(op) && op.aux_bytes < 4 * static_cast<uint64_t>(model.op(op.inputs[0]).numel()))
      add(v, op_label(model, v) + " (SoftmaxCELoss) keeps " + std::to_string(op.aux_bytes) +
                 " bytes of aux and not its logits; its log-probabilities need " +
                 std::to_string(4 * model.op(op.inputs[0]).numel()) + " (f32)");
    if (op.kind == OpKind::Embedding && model.op(op.inputs.at(0)).kind != OpKind::Input)
      add(v, op_label(model, v) + " looks up ids computed by the model; only the input's ids can be executed");
    // The other kernels read dense row-major inputs; a view is handed over as
    // a pointer into its storage, so only a contiguous one can feed them (an
    // Attention's output too, laid out in its q's order).
    // A Linear keeps the folded copy of its input that PyTorch multiplies
    // (aux): the backend makes it there, when it is that copy.
    const std::vector<CastCopy> copies = cast_copies(op, model.ops().first(static_cast<std::size_t>(v)));
    uint64_t copy_bytes = 0;
    for (const CastCopy& c : copies) copy_bytes += c.bytes;
    // Autocast's saved casts sit at the end of aux(v): it must hold them, and
    // the CPU backend writes each as the input's elements in order, so a
    // strided input has none (autocast.h).
    if (op.aux_bytes < copy_bytes)
      add(v, op_label(model, v) + " keeps " + std::to_string(op.aux_bytes) + " bytes of aux; autocast's casts of its inputs need " +
                 std::to_string(copy_bytes));
    for (const CastCopy& c : copies) {
      const Op& in = model.op(op.inputs[static_cast<std::size_t>(c.input)]);
      if (!in.strides->empty() && !is_contiguous(in.shape, *in.strides))
        add(v, op_label(model, v) + " saves autocast's cast of the non-contiguous " + op_label(model, op.inputs[static_cast<std::size_t>(c.input)]) +
                   ", which the CPU backend cannot copy yet (simulate it instead)");
    }
    if (op.kind == OpKind::Linear && op.aux_bytes > copy_bytes && dense_copy(model, v) != DenseCopy::Aux)
      add(v, op_label(model, v) + " (Linear) keeps " + std::to_string(op.aux_bytes) +
                 " bytes of aux that are not a copy of its strided input, which the kernels cannot make");
    // The kernels that read rows get a strided input copied dense (dense_copy).
    if (reads_strides(op) || dense_copy(model, v) != DenseCopy::None) continue;
    for (const int u : op.inputs) {
      const Op& in = model.op(u);
      if (!in.strides->empty() && !is_contiguous(in.shape, *in.strides)) {
        add(v, op_label(model, v) + " (" + std::string(kind_name(op.kind)) + ") reads the non-contiguous " +
                   (in.view ? "view " : "tensor ") + op_label(model, u) +
                   ", which the kernels cannot run yet (simulate it instead)");
        break;
      }
    }
  }
  return out;
}

bool Model::executable() const { return run_blockers(*this, 1).empty(); }

}  // namespace remat
