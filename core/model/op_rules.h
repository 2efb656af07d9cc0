// Per-kind rules of the memory model: output shape, bytes, FLOPs, saved tensors,
// private saved tensors (aux) and parameter bytes, derived from an op's kind,
// attributes and inputs. One entry per kind in op_rules.cpp; the table in
// docs/model-format.md says the same op by op, with PyTorch's reasons.
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "core/model/op.h"

namespace remat {

// Checks `op` against its inputs (among `before`, the ops the model holds so
// far: op ids index it) and fills what the caller
// left unset: shape (for kinds that infer it), bytes, costs, saved, aux,
// params, and the layout (view, storage, strides). Fields the caller set
// explicitly (bytes > 0, costs > 0, aux_bytes > 0, non-empty saved) are kept:
// custom and imported ops carry their own. Throws InputError naming `where`
// (empty: "op N", N being the id it will have, before.size()). It takes the
// ops, not the Model, so that Model (which calls it from add) and the rules do
// not depend on each other.
void derive_op(Op& op, std::span<const Op> before, std::string_view where, bool explicit_saved);
// What the rules read of `op`: its kind, inputs, shape, dtype, activation,
// dropout rate and attributes, every other field unset.
Op rule_fields(const Op& op);
// What the rules alone make of `op` (rule_fields, every other field
// derived), at its place after `before`: a file's op differs from it exactly
// in what the file gave explicitly (a capture's costs, an aux), which writers
// and transforms keep and nothing else.
Op derived_by_rules(const Op& op, std::span<const Op> before, std::string_view where);
// `where`, or "op N" when it is empty: what error messages call an op.
std::string where_label(std::string_view where, int id);

// True for ops a backend can run (the kinds of core/exec/exec_kinds.h, f32,
// with the bytes their kernels write).
bool executable(const Op& op);
// Why op is not executable ("" when it is), for the lists `remat model` and
// `remat run` print. What the model around an op adds (its inputs' strides
// and dtypes) is core/exec/run_check.h's.
std::string exec_problem(const Op& op);
// The statistics a norm keeps in aux(v): LayerNorm's mean and rstd per row,
// GroupNorm's per sample and group, BatchNorm's batch mean and inverse std
// per channel. How many of each (aux holds two runs of them: all means, then
// all rstds); 0 for any other op.
int64_t norm_stat_count(const Op& op);
// A bf16/f16 norm whose aux(v) holds its statistics in its own dtype (2 ×
// count × 2 bytes at its start; less than f32's 8 bytes a pair in all), as
// PyTorch's CPU kernels keep them on a 16-bit input:
// the mixed call (core/exec/mixed_call.h) narrows the f32 kernels' into aux
// and widens them back for the backward.
bool norm_stats_in_dtype(const Op& op);
// A SoftmaxCELoss that keeps its log-probabilities in aux(v), as PyTorch's
// log_softmax + nll_loss do (what a capture records), rather than its logits:
// its kernels then write and read aux(v). check_executable (core/exec) checks
// that aux(v) holds them.
bool ce_keeps_log_probs(const Op& op);
// An MSELoss or BCEWithLogitsLoss (a loss against a target) that keeps an f32
// copy of its input in aux(v) rather than the input (autocast's cast of a
// bf16/f16 input, docs/memory-model.md): its kernels write and read that copy.
bool target_loss_keeps_f32_input(const Op& op);
// Why the kernels cannot run op's attributes (pads that differ at the two
// ends of a dimension), or "" when they can. Here, not in core/exec, so that
// executable() needs nothing from the executor (no cycle between them).
std::string kernel_attr_problem(const Op& op);

// The part of op.param_bytes that is not trained: BatchNorm's running mean and
// variance (fp32 buffers, updated in place). They get no gradient and no
// optimizer state (core/analysis/step_memory.h).
uint64_t buffer_bytes(const Op& op);

// The operands of a Pointwise op (op.attrs: fn, const_at): operand k is
// activation input `input` (an index into op.inputs), the constant or the
// scalar. `problem` says why they do not fill the function's arity ("": they do).
struct PwOperand {
  enum Src : uint8_t { Input, Constant, Scalar } src = Scalar;
  int input = -1;
};
struct PwOperands {
  int arity = 0;
  PwOperand at[3];
  std::string problem;
};
PwOperands pointwise_operands(const Op& op);
// Whether operand k needs a gradient: an activation that carries one to a
// parameter (grad_flow.h; the model's input has none), or a learned constant.
// `before` holds the ops up to op (op ids index it).
bool pointwise_needs_grad(const Op& op, const PwOperands& ops, int k, std::span<const Op> before);


// "[2,3]" for messages.
std::string shape_string(std::span<const int64_t> s);

}  // namespace remat
