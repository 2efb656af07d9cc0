#include "core/exec/cpu_ops.h"

#include <array>
#include <cstring>

#include "core/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/kernels/cpu_kernels.h"
#include "core/op_rules.h"

namespace remat {
namespace {

// Where a GEMM or LayerNorm writes the input gradient nobody reads.
float* dx_or_discard(CpuOpState& s, const OpCall& c) { return c.dx(0) ? c.dx(0) : s.scratch[kDiscardedDx]; }

// A loss's value goes to the backend's scalar (read_loss) and into A(v).
void store_loss(CpuOpState& s, const OpCall& c, float loss) {
  s.loss = loss;
  if (c.out() && c.op.bytes >= sizeof loss) std::memcpy(c.out(), &loss, sizeof loss);
}

// ---- entries (REMAT_EXEC_KINDS) ------------------------------------------------

void fwd_linear(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  cpu::linear_fwd(c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), x.rows(), x.cols(), c.op.cols());
}
void bwd_linear(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  cpu::linear_bwd(c.in(0), s.param(c.v, 0), c.dy(), dx_or_discard(s, c), s.param_grad(c.v, 0), s.param_grad(c.v, 1),
                  x.rows(), x.cols(), c.op.cols(), c.dx(0) && c.acc(0));
}

void fwd_dense(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  cpu::dense_fwd(kernel_act(c.op.act), c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), x.rows(), x.cols(),
                 c.op.cols());
}
void bwd_dense(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  cpu::dense_bwd(kernel_act(c.op.act), c.in(0), c.self(), s.param(c.v, 0), c.dy(), dx_or_discard(s, c),
                 s.param_grad(c.v, 0), s.param_grad(c.v, 1), s.scratch[kPreActGrad], x.rows(), x.cols(), c.op.cols(),
                 c.dx(0) && c.acc(0));
}

void fwd_activation(CpuOpState&, const OpCall& c) { cpu::act_fwd(kernel_act(c.op.kind), c.in(0), c.out(), c.op.numel()); }
void bwd_activation(CpuOpState&, const OpCall& c) {
  if (!c.dx(0)) return;
  // ReLU and Tanh differentiate from their output, GELU from its input (op_rules' saved sets).
  const float* x_or_y = c.op.kind == OpKind::GELU ? c.in(0) : c.self();
  cpu::act_bwd(kernel_act(c.op.kind), x_or_y, c.dy(), c.dx(0), c.op.numel(), c.acc(0));
}

// aux(v) holds the row statistics (2, rows); the backward reads x and them, not y.
void fwd_layernorm(CpuOpState& s, const OpCall& c) {
  cpu::layernorm_fwd(c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), c.aux(), c.op.rows(), c.op.cols());
}
void bwd_layernorm(CpuOpState& s, const OpCall& c) {
  cpu::layernorm_bwd(c.in(0), c.aux(), s.param(c.v, 0), c.dy(), dx_or_discard(s, c),
                     s.param_grad(c.v, 0), s.param_grad(c.v, 1), c.op.rows(), c.op.cols(), c.dx(0) && c.acc(0));
}

void fwd_add(CpuOpState&, const OpCall& c) { cpu::add_fwd(c.in(0), c.in(1), c.out(), c.op.numel()); }
void bwd_add(CpuOpState&, const OpCall& c) {
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k)
    if (c.dx(k)) cpu::add_into(c.dy(), c.dx(k), c.op.numel(), c.acc(k));
}

void fwd_dropout(CpuOpState& s, const OpCall& c) {
  cpu::dropout_fwd(c.in(0), c.out(), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v));
}
void bwd_dropout(CpuOpState& s, const OpCall& c) {
  if (c.dx(0))
    cpu::dropout_bwd(c.dy(), c.dx(0), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v), c.acc(0));
}

void fwd_mse(CpuOpState& s, const OpCall& c) {
  const int64_t n = c.in_op(0).numel();
  if (s.target_n != static_cast<uint64_t>(n)) throw InternalError(op_label(c.model, c.v) + ": no MSE target loaded");
  store_loss(s, c, cpu::mse_fwd(c.in(0), s.target, n));
}
void bwd_mse(CpuOpState& s, const OpCall& c) {
  if (c.dx(0)) cpu::mse_bwd(c.in(0), s.target, c.dx(0), c.in_op(0).numel(), c.acc(0));
}

void fwd_softmax_ce(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  if (s.labels_n != static_cast<uint64_t>(x.rows())) throw InternalError(op_label(c.model, c.v) + ": no labels loaded");
  store_loss(s, c, cpu::softmax_ce_fwd(c.in(0), s.labels, x.rows(), x.cols()));
}
void bwd_softmax_ce(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  if (c.dx(0)) cpu::softmax_ce_bwd(c.in(0), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0));
}

#define REMAT_CPU_ROW(Kind, entry) KernelEntry<CpuOpState>{OpKind::Kind, &fwd_##entry, &bwd_##entry},
constexpr std::array kCpuKernels = {REMAT_EXEC_KINDS(REMAT_CPU_ROW)};
#undef REMAT_CPU_ROW

}  // namespace

void cpu_forward(CpuOpState& s, const OpCall& c) { kernel_for(kCpuKernels, c, "cpu").fwd(s, c); }

void cpu_backward(CpuOpState& s, const OpCall& c) {
  if (!c.dy() && !is_loss(c.op.kind)) throw InternalError(op_label(c.model, c.v) + ": backward without its gradient G");
  kernel_for(kCpuKernels, c, "cpu").bwd(s, c);
}

}  // namespace remat
