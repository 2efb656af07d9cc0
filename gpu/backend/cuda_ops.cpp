#include "gpu/backend/cuda_ops.h"

#include <array>

#include "core/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/op_rules.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

float* dx_or_discard(CudaOpState& s, const OpCall& c) { return c.dx(0) ? c.dx(0) : s.scratch[kDiscardedDx]; }

// The loss kernels wrote the baseline scalar (read_loss); A(v) gets a copy, as on the CPU.
void copy_loss(CudaOpState& s, const OpCall& c) {
  if (c.out() && c.op.bytes >= sizeof(float))
    CUDA_CHECK_THROW(cudaMemcpyAsync(c.out(), s.loss, sizeof(float), cudaMemcpyDeviceToDevice, s.stream));
}

// ---- entries (REMAT_EXEC_KINDS) ------------------------------------------------

void fwd_linear(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  linear_fwd(c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), x.rows(), x.cols(), c.op.cols(), s.cublas, s.stream);
}
void bwd_linear(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  linear_bwd(c.in(0), s.param(c.v, 0), c.dy(), dx_or_discard(s, c), s.param_grad(c.v, 0), s.param_grad(c.v, 1),
             x.rows(), x.cols(), c.op.cols(), c.dx(0) && c.acc(0), s.cublas, s.stream);
}

void fwd_dense(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  dense_fwd(kernel_act(c.op.act), c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), x.rows(), x.cols(), c.op.cols(),
            s.cublas, s.stream);
}
void bwd_dense(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  dense_bwd(kernel_act(c.op.act), c.in(0), c.self(), s.param(c.v, 0), c.dy(), dx_or_discard(s, c),
            s.param_grad(c.v, 0), s.param_grad(c.v, 1), s.scratch[kPreActGrad], x.rows(), x.cols(), c.op.cols(),
            c.dx(0) && c.acc(0), s.cublas, s.stream);
}

void fwd_activation(CudaOpState& s, const OpCall& c) {
  act_fwd(kernel_act(c.op.kind), c.in(0), c.out(), c.op.numel(), s.stream);
}
void bwd_activation(CudaOpState& s, const OpCall& c) {
  if (!c.dx(0)) return;
  const float* x_or_y = c.op.kind == OpKind::GELU ? c.in(0) : c.self();
  act_bwd(kernel_act(c.op.kind), x_or_y, c.dy(), c.dx(0), c.op.numel(), c.acc(0), s.stream);
}

// aux(v) holds the row statistics (2, rows), as on the CPU.
void fwd_layernorm(CudaOpState& s, const OpCall& c) {
  layernorm_fwd(c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), c.aux(), c.op.rows(), c.op.cols(),
                s.stream);
}
void bwd_layernorm(CudaOpState& s, const OpCall& c) {
  layernorm_bwd(c.in(0), c.aux(), s.param(c.v, 0), c.dy(), dx_or_discard(s, c), s.param_grad(c.v, 0),
                s.param_grad(c.v, 1), c.op.rows(), c.op.cols(), c.dx(0) && c.acc(0), s.stream);
}

void fwd_add(CudaOpState& s, const OpCall& c) { add_fwd(c.in(0), c.in(1), c.out(), c.op.numel(), s.stream); }
void bwd_add(CudaOpState& s, const OpCall& c) {
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k)
    if (c.dx(k)) add_into(c.dy(), c.dx(k), c.op.numel(), c.acc(k), s.stream);
}

void fwd_dropout(CudaOpState& s, const OpCall& c) {
  dropout_fwd(c.in(0), c.out(), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v), s.stream);
}
void bwd_dropout(CudaOpState& s, const OpCall& c) {
  if (c.dx(0))
    dropout_bwd(c.dy(), c.dx(0), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v), c.acc(0), s.stream);
}

void fwd_mse(CudaOpState& s, const OpCall& c) {
  const int64_t n = c.in_op(0).numel();
  if (s.target_n != static_cast<uint64_t>(n)) throw InternalError(op_label(c.model, c.v) + ": no MSE target loaded");
  mse_fwd(c.in(0), s.target, s.loss, n, s.stream);
  copy_loss(s, c);
}
void bwd_mse(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) mse_bwd(c.in(0), s.target, c.dx(0), c.in_op(0).numel(), c.acc(0), s.stream);
}

void fwd_softmax_ce(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  if (s.labels_n != static_cast<uint64_t>(x.rows())) throw InternalError(op_label(c.model, c.v) + ": no labels loaded");
  softmax_ce_fwd(c.in(0), s.labels, s.loss, x.rows(), x.cols(), s.stream);
  copy_loss(s, c);
}
void bwd_softmax_ce(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  if (c.dx(0)) softmax_ce_bwd(c.in(0), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0), s.stream);
}

#define REMAT_CUDA_ROW(Kind, entry) KernelEntry<CudaOpState>{OpKind::Kind, &fwd_##entry, &bwd_##entry},
constexpr std::array kCudaKernels = {REMAT_EXEC_KINDS(REMAT_CUDA_ROW)};
#undef REMAT_CUDA_ROW

}  // namespace

void cuda_forward(CudaOpState& s, const OpCall& c) { kernel_for(kCudaKernels, c, "cuda").fwd(s, c); }

void cuda_backward(CudaOpState& s, const OpCall& c) {
  if (!c.dy() && !is_loss(c.op.kind)) throw InternalError(op_label(c.model, c.v) + ": backward without its gradient G");
  kernel_for(kCudaKernels, c, "cuda").bwd(s, c);
}

}  // namespace remat::cuda
