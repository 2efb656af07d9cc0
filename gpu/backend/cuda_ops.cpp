#include "gpu/backend/cuda_ops.h"

#include <array>
#include <string>
#include <vector>

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
  const bool from_input = c.op.kind == OpKind::GELU || c.op.kind == OpKind::SiLU;  // as on the CPU
  const float* x_or_y = from_input ? c.in(0) : c.self();
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

ConvContext conv_context(const CudaOpState& s) {
  return ConvContext{s.cublas, s.cudnn, s.stream, s.conv_workspace, s.conv_workspace_bytes};
}
void fwd_conv(CudaOpState& s, const OpCall& c) {
  const float* bias = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;
  conv2d_fwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), bias, c.out(), conv_context(s));
}
void bwd_conv(CudaOpState& s, const OpCall& c) {
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  conv2d_bwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), c.dy(), c.dx(0), s.param_grad(c.v, 0), db,
             c.dx(0) && c.acc(0), conv_context(s));
}

// aux(v): batch mean then inverse std per channel; eps as on the CPU (cpu_ops.cpp).
void fwd_batchnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  batchnorm_fwd(c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), c.aux(), c.aux() + d.c, nullptr, nullptr, d.n,
                d.c, d.hw, kBatchNormEps, 0.1f, s.stream);
}
void bwd_batchnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  batchnorm_bwd(c.in(0), c.dy(), s.param(c.v, 0), c.aux(), c.aux() + d.c, dx_or_discard(s, c), s.param_grad(c.v, 0),
                s.param_grad(c.v, 1), d.n, d.c, d.hw, c.dx(0) && c.acc(0), s.stream);
}

void fwd_maxpool(CudaOpState& s, const OpCall& c) {
  maxpool2d_fwd(pool_geom(c.model, c.v), c.in(0), c.out(), reinterpret_cast<int64_t*>(c.aux()), s.stream);
}
void bwd_maxpool(CudaOpState& s, const OpCall& c) {
  if (c.dx(0))
    maxpool2d_bwd(pool_geom(c.model, c.v), c.dy(), reinterpret_cast<const int64_t*>(c.aux()), c.dx(0), c.acc(0),
                  s.stream);
}
void fwd_avgpool(CudaOpState& s, const OpCall& c) { avgpool2d_fwd(pool_geom(c.model, c.v), c.in(0), c.out(), s.stream); }
void bwd_avgpool(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) avgpool2d_bwd(pool_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0), s.stream);
}
void fwd_global_avgpool(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.in_op(0));
  global_avgpool_fwd(c.in(0), c.out(), d.n * d.c, d.hw, s.stream);
}
void bwd_global_avgpool(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.in_op(0));
  if (c.dx(0)) global_avgpool_bwd(c.dy(), c.dx(0), d.n * d.c, d.hw, c.acc(0), s.stream);
}

void fwd_softmax(CudaOpState& s, const OpCall& c) { softmax_fwd(c.in(0), c.out(), c.op.rows(), c.op.cols(), s.stream); }
void bwd_softmax(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) softmax_bwd(c.self(), c.dy(), c.dx(0), c.op.rows(), c.op.cols(), c.acc(0), s.stream);
}

void fwd_concat(CudaOpState& s, const OpCall& c) {
  const ConcatDims d = concat_dims(c.model, c.v);
  std::vector<const float*> xs;
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k) xs.push_back(c.in(k));
  concat_fwd(xs.data(), d.widths.data(), static_cast<int64_t>(xs.size()), c.out(), d.outer, d.inner, s.stream);
}
void bwd_concat(CudaOpState& s, const OpCall& c) {
  const ConcatDims d = concat_dims(c.model, c.v);
  std::vector<float*> dxs;
  std::vector<uint8_t> acc;
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k) {
    dxs.push_back(c.dx(k));
    acc.push_back(c.acc(k) ? 1 : 0);
  }
  concat_bwd(c.dy(), dxs.data(), d.widths.data(), static_cast<int64_t>(dxs.size()), d.outer, d.inner, acc.data(),
             s.stream);
}

// Views: nothing to compute forward (the executor aliases the storage). On
// CUDA only a Reshape view's backward (the identity map) exists so far; a
// copying Reshape and the strided views' backward need a strided-copy kernel.
[[noreturn]] void no_strided_kernel(const OpCall& c, const char* what) {
  throw InputError(op_label(c.model, c.v) + ": the cuda backend cannot run " + what + " of a " +
                   std::string(kind_name(c.op.kind)) + " yet (the cpu backend can)");
}
void fwd_reshape(CudaOpState&, const OpCall& c) {
  if (!c.op.view) no_strided_kernel(c, "the copy");
}
void bwd_reshape(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) add_into(c.dy(), c.dx(0), c.in_op(0).numel(), c.acc(0), s.stream);
}
void fwd_view(CudaOpState&, const OpCall&) {}
void bwd_view(CudaOpState&, const OpCall& c) {
  if (c.dx(0)) no_strided_kernel(c, "the backward");
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
