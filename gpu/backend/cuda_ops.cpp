#include "gpu/backend/cuda_ops.h"

#include <array>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/exec/pad_exec.h"
#include "core/exec/view_geom.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

float* dx_or_discard(CudaOpState& s, const OpCall& c) { return c.dx(0) ? c.dx(0) : s.scratch[kDiscardedDx]; }

// The cuBLAS workspace as doubles, for the kernels that sum in two steps over
// the whole grid (the loss, batch norm): no GEMM runs between their kernels on
// the stream. Without `need` of them they would fall back to one block per
// sum, unnoticed: an InternalError instead (the workspace holds 4 MiB at least,
// the most they need is 2 MiB, batch norm's over 65535 channels).
struct LentDoubles {
  double* data;
  int64_t count;
};
LentDoubles lent_doubles(const CudaOpState& s, const OpCall& c, int64_t need) {
  const auto count = static_cast<int64_t>(s.cublas_workspace_bytes / sizeof(double));
  if (!s.cublas_workspace || count < need)
    throw InternalError(op_label(c.model, c.v) + ": the backend lent " + std::to_string(count) + " of the " +
                        std::to_string(need) + " doubles its partial sums need");
  return {static_cast<double*>(s.cublas_workspace), count};
}

// The loss kernels wrote the baseline scalar (read_loss); A(v) gets a copy, as on the CPU.
void copy_loss(CudaOpState& s, const OpCall& c) {
  if (c.out() && c.op.bytes >= sizeof(float))
    CUDA_CHECK_THROW(cudaMemcpyAsync(c.out(), s.loss, sizeof(float), cudaMemcpyDeviceToDevice, s.stream));
}

// The stored tensors of a lowp_io op (s.io: core/exec/pointwise_path.h),
// as the pointwise_io.cu kernels take them.
IoType io_type(const OpCall& c, DType d) {
  if (d == DType::BF16) return IoType::BF16;
  if (d == DType::F16) return IoType::F16;
  if (d == DType::F32) return IoType::F32;
  throw InternalError(op_label(c.model, c.v) + ": a " + std::string(dtype_name(d)) + " tensor handed to a 16-bit kernel");
}
IoIn io_in(const OpCall& c, const IoTensor& t) {
  if (!t.p) throw InternalError(op_label(c.model, c.v) + ": a tensor the 16-bit kernel reads was not handed over");
  return {t.p, io_type(c, t.dtype)};
}
IoOut io_out(const OpCall& c, const IoTensor& t) {
  if (!t.p) throw InternalError(op_label(c.model, c.v) + ": a tensor the 16-bit kernel writes was not handed over");
  return {t.p, io_type(c, t.dtype), t.add};
}

// ---- entries (REMAT_EXEC_KINDS) ------------------------------------------------

// Linear and Dense read 16-bit x, W (and dy) where the mixed call set them
// (s.lowp: core/exec/gemm_path.h's lowp_gemm), else the f32 tables.
HalfType half_type(const LowpOperands& o) { return o.dtype == DType::F16 ? HalfType::F16 : HalfType::BF16; }
const uint16_t* u16(const void* p) { return static_cast<const uint16_t*>(p); }
void fwd_linear_lowp(CudaOpState& s, const OpCall& c, Act act, const float* b) {
  const Op& x = c.in_op(0);
  ++s.lowp_calls;
  linear_fwd_lowp(half_type(s.lowp), act, u16(s.lowp.x), u16(s.lowp.w), b, c.out(), x.rows(), x.cols(), c.op.cols(),
                  s.cublas, s.stream);
}
void bwd_linear_lowp(CudaOpState& s, const OpCall& c, float* db) {
  const Op& x = c.in_op(0);
  ++s.lowp_calls;
  linear_bwd_lowp(half_type(s.lowp), u16(s.lowp.x), u16(s.lowp.w), u16(s.lowp.dy), c.dy(), dx_or_discard(s, c),
                  s.param_grad(c.v, 0), db, x.rows(), x.cols(), c.op.cols(), c.dx(0) && c.acc(0), s.cublas, s.stream);
}

void fwd_linear(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  const float* b = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;  // no bias: as the CPU
  if (s.lowp.active()) return fwd_linear_lowp(s, c, Act::None, b);
  linear_fwd(c.in(0), s.param(c.v, 0), b, c.out(), x.rows(), x.cols(), c.op.cols(), s.cublas, s.stream);
}
void bwd_linear(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  if (s.lowp.active()) return bwd_linear_lowp(s, c, db);
  linear_bwd(c.in(0), s.param(c.v, 0), c.dy(), dx_or_discard(s, c), s.param_grad(c.v, 0), db, x.rows(), x.cols(),
             c.op.cols(), c.dx(0) && c.acc(0), s.cublas, s.stream);
}

void fwd_dense(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  if (s.lowp.active()) return fwd_linear_lowp(s, c, kernel_act(c.op.act), s.param(c.v, 1));
  dense_fwd(kernel_act(c.op.act), c.in(0), s.param(c.v, 0), s.param(c.v, 1), c.out(), x.rows(), x.cols(), c.op.cols(),
            s.cublas, s.stream);
}
void bwd_dense(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  // lowp_gemm holds only for Act::None here: the gradient is dy's, as a Linear's.
  if (s.lowp.active()) {
    if (c.op.act != Activation::None)
      throw InternalError(op_label(c.model, c.v) + ": a 16-bit backward for a Dense with an activation");
    return bwd_linear_lowp(s, c, s.param_grad(c.v, 1));
  }
  dense_bwd(kernel_act(c.op.act), c.in(0), c.self(), s.param(c.v, 0), c.dy(), dx_or_discard(s, c),
            s.param_grad(c.v, 0), s.param_grad(c.v, 1), s.scratch[kPreActGrad], x.rows(), x.cols(), c.op.cols(),
            c.dx(0) && c.acc(0), s.cublas, s.stream);
}

void fwd_activation(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return act_fwd_io(kernel_act(c.op.kind), io_in(c, s.io.in[0]), io_out(c, s.io.out), c.op.numel(), s.stream);
  }
  act_fwd(kernel_act(c.op.kind), c.in(0), c.out(), c.op.numel(), s.stream);
}
void bwd_activation(CudaOpState& s, const OpCall& c) {
  if (!c.dx(0)) return;
  const bool from_input = c.op.kind == OpKind::GELU || c.op.kind == OpKind::SiLU;  // as on the CPU
  if (s.io.active) {
    ++s.io_calls;
    return act_bwd_io(kernel_act(c.op.kind), io_in(c, from_input ? s.io.in[0] : s.io.out), io_in(c, s.io.dy),
                      io_out(c, s.io.dx[0]), c.op.numel(), s.stream);
  }
  const float* x_or_y = from_input ? c.in(0) : c.self();
  act_bwd(kernel_act(c.op.kind), x_or_y, c.dy(), c.dx(0), c.op.numel(), c.acc(0), s.stream);
}

// aux(v) holds the row statistics (2, rows), as on the CPU.
void fwd_layernorm(CudaOpState& s, const OpCall& c) {
  layernorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.op.rows(), c.op.cols(),
                s.stream, static_cast<float>(layernorm_eps(c.op)));
}
void bwd_layernorm(CudaOpState& s, const OpCall& c) {
  layernorm_bwd(c.in(0), c.aux(), norm_param(s, c, 0), c.dy(), dx_or_discard(s, c), norm_param_grad(s, c, 0),
                norm_param_grad(s, c, 1), c.op.rows(), c.op.cols(), c.dx(0) && c.acc(0), s.stream);
}

void fwd_add(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return add_fwd_io(io_in(c, s.io.in[0]), io_in(c, s.io.in[1]), io_out(c, s.io.out), c.op.numel(), s.stream);
  }
  if (reads_strided(c.model, c.v)) {  // never on the 16-bit path (lowp_io)
    const float* x[3] = {c.in(0), c.in(1), nullptr};
    return pointwise_fwd(strided_add_geom(c.model, c.v), x, c.out(), s.stream);
  }
  add_fwd(c.in(0), c.in(1), c.out(), c.op.numel(), s.stream);
}
void bwd_add(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    for (std::size_t k = 0; k < c.op.inputs.size(); ++k)
      if (c.dx(k)) copy_io(io_in(c, s.io.dy), io_out(c, s.io.dx[k]), c.op.numel(), s.stream);
    return;
  }
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k)
    if (c.dx(k)) add_into(c.dy(), c.dx(k), c.op.numel(), c.acc(k), s.stream);
}

void fwd_dropout(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return dropout_io(io_in(c, s.io.in[0]), io_out(c, s.io.out), c.op.numel(), c.op.dropout_p, s.seed,
                      static_cast<uint32_t>(c.v), s.stream);
  }
  dropout_fwd(c.in(0), c.out(), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v), s.stream);
}
void bwd_dropout(CudaOpState& s, const OpCall& c) {
  if (s.io.active && c.dx(0)) {
    ++s.io_calls;
    return dropout_io(io_in(c, s.io.dy), io_out(c, s.io.dx[0]), c.op.numel(), c.op.dropout_p, s.seed,
                      static_cast<uint32_t>(c.v), s.stream);
  }
  if (c.dx(0))
    dropout_bwd(c.dy(), c.dx(0), c.op.numel(), c.op.dropout_p, s.seed, static_cast<uint32_t>(c.v), c.acc(0), s.stream);
}

// The losses against a target of the input's shape (MSE, BCE on logits),
// with autocast's f32 copy of a low-precision input, which the backward then
// reads (aux) instead of it.
void target_loss_fwd(CudaOpState& s, const OpCall& c,
                     void (*loss)(const float*, const float*, float*, int64_t, cudaStream_t)) {
  const int64_t n = c.in_op(0).numel();
  if (s.target_n != static_cast<uint64_t>(n))
    throw InternalError(op_label(c.model, c.v) + ": no " + std::string(kind_name(c.op.kind)) + " target loaded");
  loss(c.in(0), s.target, s.loss, n, s.stream);
  if (target_loss_keeps_f32_input(c.op))
    CUDA_CHECK_THROW(cudaMemcpyAsync(c.aux(), c.in(0), 4 * static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s.stream));
  copy_loss(s, c);
}
void target_loss_bwd(CudaOpState& s, const OpCall& c,
                     void (*grad)(const float*, const float*, float*, int64_t, bool, cudaStream_t)) {
  const float* x = target_loss_keeps_f32_input(c.op) ? c.aux() : c.in(0);
  if (c.dx(0)) grad(x, s.target, c.dx(0), c.in_op(0).numel(), c.acc(0), s.stream);
}

void fwd_mse(CudaOpState& s, const OpCall& c) { target_loss_fwd(s, c, mse_fwd); }
void bwd_mse(CudaOpState& s, const OpCall& c) { target_loss_bwd(s, c, mse_bwd); }
void fwd_bce_logits(CudaOpState& s, const OpCall& c) { target_loss_fwd(s, c, bce_logits_fwd); }
void bwd_bce_logits(CudaOpState& s, const OpCall& c) { target_loss_bwd(s, c, bce_logits_bwd); }

void fwd_softmax_ce(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  const double eps = c.op.attrs->label_smoothing;
  if (s.labels_n != static_cast<uint64_t>(x.rows())) throw InternalError(op_label(c.model, c.v) + ": no labels loaded");
  const auto [partials, capacity] = lent_doubles(s, c, softmax_ce_partial_count(x.rows()));
  if (s.io.active) {
    ++s.io_calls;
    softmax_ce_fwd_io(io_in(c, s.io.in[0]), s.labels, s.loss, ce_keeps_log_probs(c.op) ? c.aux() : nullptr, x.rows(),
                      x.cols(), s.stream, partials, capacity, eps);
    return copy_loss(s, c);
  }
  if (ce_keeps_log_probs(c.op))
    softmax_ce_fwd_keep_logp(c.in(0), s.labels, s.loss, c.aux(), x.rows(), x.cols(), s.stream, partials, capacity, eps);
  else
    softmax_ce_fwd(c.in(0), s.labels, s.loss, x.rows(), x.cols(), s.stream, partials, capacity, eps);
  copy_loss(s, c);
}
void bwd_softmax_ce(CudaOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  const double eps = c.op.attrs->label_smoothing;
  if (!c.dx(0)) return;
  if (s.io.active) {
    ++s.io_calls;
    if (ce_keeps_log_probs(c.op))
      softmax_ce_bwd_from_logp_io(c.aux(), s.labels, io_out(c, s.io.dx[0]), x.rows(), x.cols(), s.stream, eps);
    else
      softmax_ce_bwd_io(io_in(c, s.io.in[0]), s.labels, io_out(c, s.io.dx[0]), x.rows(), x.cols(), s.stream, eps);
    return;
  }
  if (ce_keeps_log_probs(c.op))
    softmax_ce_bwd_from_logp(c.aux(), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0), s.stream, eps);
  else
    softmax_ce_bwd(c.in(0), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0), s.stream, eps);
}

ConvContext conv_context(const CudaOpState& s) {
  return ConvContext{s.cublas, s.cudnn, s.stream, s.conv_workspace, s.conv_workspace_bytes,
                     s.nondeterministic_backward};
}
// A Conv where the mixed call set 16-bit operands (lowp_conv): cuDNN writes
// the output in 16 bits to A(v) (s.lowp.y), the result itself without a bias
// (s.lowp.y_final), else widened into the f32 output the call narrows back
// after the bias; the input gradient in 16 bits to the
// input's unwidened scratch (s.lowp.dx), widened into the f32 dx the call
// rounds and stores; the weight gradient staged in the workspace, widened
// into the call's zeroed f32 scratch.
void fwd_conv_lowp(CudaOpState& s, const OpCall& c, const float* bias) {
  ++s.lowp_conv_calls;
  conv2d_fwd_lowp(half_type(s.lowp), conv_geom(c.model, c.v), u16(s.lowp.x), u16(s.lowp.w), bias,
                  static_cast<uint16_t*>(s.lowp.y), s.lowp.y_final ? nullptr : c.out(), conv_context(s));
}
void bwd_conv_lowp(CudaOpState& s, const OpCall& c, float* db) {
  if (c.dx(0) && c.acc(0)) throw InternalError(op_label(c.model, c.v) + ": a 16-bit convolution's dx is not added");
  ++s.lowp_conv_calls;
  conv2d_bwd_lowp(half_type(s.lowp), conv_geom(c.model, c.v), u16(s.lowp.x), u16(s.lowp.w), u16(s.lowp.dy),
                  db ? c.dy() : nullptr, c.dx(0) ? static_cast<uint16_t*>(s.lowp.dx) : nullptr, c.dx(0),
                  s.param_grad(c.v, 0), db, conv_context(s));
}
void fwd_conv(CudaOpState& s, const OpCall& c) {
  const float* bias = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;
  if (s.lowp.active()) return fwd_conv_lowp(s, c, bias);
  conv2d_fwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), bias, c.out(), conv_context(s));
}
void bwd_conv(CudaOpState& s, const OpCall& c) {
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  if (s.lowp.active()) return bwd_conv_lowp(s, c, db);
  conv2d_bwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), c.dy(), c.dx(0), s.param_grad(c.v, 0), db,
             c.dx(0) && c.acc(0), conv_context(s));
}

// A ConvTranspose as the convolution it is the gradient of (conv_transpose_geom):
// forward is that convolution's input gradient (cuDNN's backward-data where
// it runs on cuDNN), the backward its forward and its weight gradient.
void fwd_conv_transpose(CudaOpState& s, const OpCall& c) {
  const float* bias = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;
  conv_transpose2d_fwd(conv_transpose_geom(c.model, c.v), c.in(0), s.param(c.v, 0), bias, c.out(), conv_context(s));
}
void bwd_conv_transpose(CudaOpState& s, const OpCall& c) {
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  conv_transpose2d_bwd(conv_transpose_geom(c.model, c.v), c.in(0), s.param(c.v, 0), c.dy(), c.dx(0),
                       s.scratch[kDiscardedDx], s.param_grad(c.v, 0), db, c.dx(0) && c.acc(0), conv_context(s));
}

// aux(v): the mean of each (sample, group), then their rstd, as on the CPU.
void fwd_groupnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const int64_t groups = c.op.attrs->groups;
  groupnorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.aux() + d.n * groups, d.n, d.c, d.hw,
                groups, layernorm_eps(c.op), s.stream);
}
void bwd_groupnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const int64_t groups = c.op.attrs->groups;
  groupnorm_bwd(c.in(0), c.dy(), norm_param(s, c, 0), c.aux(), c.aux() + d.n * groups, dx_or_discard(s, c),
                norm_param_grad(s, c, 0), norm_param_grad(s, c, 1), d.n, d.c, d.hw, groups, c.dx(0) && c.acc(0), s.stream);
}

void fwd_upsample(CudaOpState& s, const OpCall& c) {
  const UpsampleDims d = upsample_dims(c.model, c.v);
  upsample_fwd(c.in(0), c.out(), d.planes, d.ih, d.iw, d.oh, d.ow, c.op.attrs->bilinear, c.op.attrs->align_corners,
               s.stream);
}
void bwd_upsample(CudaOpState& s, const OpCall& c) {
  if (!c.dx(0)) return;
  const UpsampleDims d = upsample_dims(c.model, c.v);
  upsample_bwd(c.dy(), c.dx(0), d.planes, d.ih, d.iw, d.oh, d.ow, c.op.attrs->bilinear, c.op.attrs->align_corners,
               c.acc(0), s.stream);
}

void fwd_pad(CudaOpState& s, const OpCall& c) { pad_fwd(pad_geom(c.model, c.v), c.in(0), c.out(), s.stream); }
void bwd_pad(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) pad_bwd(pad_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0), s.stream);
}

// aux(v): batch mean then inverse std per channel; eps as on the CPU (cpu_ops.cpp).
void fwd_batchnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const auto [partials, capacity] = lent_doubles(s, c, batchnorm_partial_count(d.n, d.c, d.hw));
  if (s.io.active) {
    ++s.io_calls;
    return batchnorm_fwd_io(io_in(c, s.io.in[0]), norm_param(s, c, 0), norm_param(s, c, 1), io_out(c, s.io.out),
                            c.aux(), c.aux() + d.c, d.n, d.c, d.hw, batchnorm_eps(c.op), s.stream, partials, capacity);
  }
  batchnorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.aux() + d.c, nullptr, nullptr, d.n,
                d.c, d.hw, batchnorm_eps(c.op), 0.1f, s.stream, partials, capacity);
}
void bwd_batchnorm(CudaOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const auto [partials, capacity] = lent_doubles(s, c, batchnorm_partial_count(d.n, d.c, d.hw));
  if (s.io.active) {  // without an input gradient, the parameters' alone (no discarded dx written)
    ++s.io_calls;
    return batchnorm_bwd_io(io_in(c, s.io.in[0]), io_in(c, s.io.dy), norm_param(s, c, 0), c.aux(), c.aux() + d.c,
                            c.dx(0) ? io_out(c, s.io.dx[0]) : IoOut{}, norm_param_grad(s, c, 0),
                            norm_param_grad(s, c, 1), d.n, d.c, d.hw, s.stream, partials, capacity);
  }
  batchnorm_bwd(c.in(0), c.dy(), norm_param(s, c, 0), c.aux(), c.aux() + d.c, dx_or_discard(s, c), norm_param_grad(s, c, 0),
                norm_param_grad(s, c, 1), d.n, d.c, d.hw, c.dx(0) && c.acc(0), s.stream, partials, capacity);
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

void fwd_softmax(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return softmax_fwd_io(io_in(c, s.io.in[0]), io_out(c, s.io.out), c.op.rows(), c.op.cols(), s.stream);
  }
  softmax_fwd(c.in(0), c.out(), c.op.rows(), c.op.cols(), s.stream);
}
void bwd_softmax(CudaOpState& s, const OpCall& c) {
  if (s.io.active && c.dx(0)) {
    ++s.io_calls;
    return softmax_bwd_io(io_in(c, s.io.out), io_in(c, s.io.dy), io_out(c, s.io.dx[0]), c.op.rows(), c.op.cols(),
                          s.stream);
  }
  if (c.dx(0)) softmax_bwd(c.self(), c.dy(), c.dx(0), c.op.rows(), c.op.cols(), c.acc(0), s.stream);
}

// A constant piece (a learned class token): broadcast into scratch by a
// strided copy, concatenated like an input; its share of dy comes back there
// and expand_bwd sums it over the broadcast into the parameter's gradient in
// the piece's order, as on the CPU.
void fwd_concat(CudaOpState& s, const OpCall& c) {
  if (reads_strided(c.model, c.v)) {  // each input copied through its strides into its slice, as on the CPU
    for (std::size_t k = 0; k < c.op.inputs.size(); ++k) {
      int64_t at = 0;
      const PwGeom g = concat_piece_geom(c.model, c.v, k, at);
      const float* x[3] = {c.in(k), nullptr, nullptr};
      pointwise_fwd(g, x, c.out() + at, s.stream);
    }
    if (c.op.attrs->const_at >= 0) {  // the constant piece, broadcast into scratch, then into its slice
      const ViewMap m = coalesced(concat_piece_map(c.model, c.v));
      strided_copy(s.param(c.v, 0), s.scratch[kConcatPiece], m.shape.data(), m.stride.data(),
                   static_cast<int>(m.shape.size()), s.stream);
      int64_t at = 0;
      const PwGeom g = concat_const_geom(c.model, c.v, at);
      const float* x[3] = {s.scratch[kConcatPiece], nullptr, nullptr};
      pointwise_fwd(g, x, c.out() + at, s.stream);
    }
    return;
  }
  const ConcatDims d = concat_dims(c.model, c.v);
  std::vector<const float*> xs;
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k) xs.push_back(c.in(k));
  if (d.piece >= 0) {
    const ViewMap m = coalesced(concat_piece_map(c.model, c.v));
    strided_copy(s.param(c.v, 0), s.scratch[kConcatPiece], m.shape.data(), m.stride.data(),
                 static_cast<int>(m.shape.size()), s.stream);
    xs.insert(xs.begin() + d.piece, s.scratch[kConcatPiece]);
  }
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
  if (d.piece >= 0) {
    dxs.insert(dxs.begin() + d.piece, s.scratch[kConcatPiece]);
    acc.insert(acc.begin() + d.piece, 0);
  }
  concat_bwd(c.dy(), dxs.data(), d.widths.data(), static_cast<int64_t>(dxs.size()), d.outer, d.inner, acc.data(),
             s.stream);
  if (d.piece >= 0) {
    const ViewMap m = coalesced(concat_piece_map(c.model, c.v));
    int64_t n = 1;
    for (const int64_t k : c.op.attrs->const_shape) n *= k;
    expand_bwd(s.scratch[kConcatPiece], s.param_grad(c.v, 0), m.shape.data(), m.stride.data(),
               static_cast<int>(m.shape.size()), n, true, s.stream);
  }
}

// Views: nothing to compute forward (the executor aliases the storage); the
// backward adds G(view) back through the view's map. An Expand's map sends
// several elements to one (stride 0): each input element sums its own, in a
// fixed order, rather than atomics in no fixed order. The copies, adds and
// sums run on the pointwise kernels (view_geom.h), which coalesce the map and
// index in 32 bits; the strided kernels take the maps those refuse.
// Maps go to the kernels coalesced: rank 8 at most there, any rank here.
// `dst` (row-major over m) = src read through m.
void copy_through(CudaOpState& s, const ViewMap& m, const float* src, float* dst) {
  if (PwGeom g; copy_geom(m, g)) {
    const float* x[3] = {src, nullptr, nullptr};
    return pointwise_fwd(g, x, dst, s.stream);
  }
  strided_copy(src, dst, m.shape.data(), m.stride.data(), static_cast<int>(m.shape.size()), s.stream);
}
// x's elements in logical order, whatever x's strides.
ViewMap dense_map(const Op& x) {
  return coalesced(ViewMap{std::vector<int64_t>(x.shape.begin(), x.shape.end()), layout_of(x), 0});
}
void gather(CudaOpState& s, const Op& x, const float* src, float* dst) { copy_through(s, dense_map(x), src, dst); }
// A Reshape that copies (its input strided); on the 16-bit path (s.io) from
// and to the tensors as stored, and its gradient copied or added as stored.
void fwd_reshape(CudaOpState& s, const OpCall& c) {
  if (c.op.view) return;
  if (s.io.active) {  // lowp_io took it only where copy_geom does
    PwGeom g;
    if (!copy_geom(dense_map(c.in_op(0)), g))
      throw InternalError(op_label(c.model, c.v) + ": a 16-bit Reshape copy whose map has no pointwise geometry");
    ++s.io_calls;
    const IoIn x[3] = {io_in(c, s.io.in[0]), {}, {}};
    return pointwise_fwd_io(g, x, io_out(c, s.io.out), s.stream);
  }
  gather(s, c.in_op(0), c.in(0), c.out());
}
void bwd_reshape(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    if (s.io.dx[0].p) copy_io(io_in(c, s.io.dy), io_out(c, s.io.dx[0]), c.in_op(0).numel(), s.stream);
    return;
  }
  if (c.dx(0)) add_into(c.dy(), c.dx(0), c.in_op(0).numel(), c.acc(0), s.stream);
}
void fwd_view(CudaOpState&, const OpCall&) {}
// On the 16-bit path (core/exec/pointwise_path.cpp's view_grad_io): G(v) read
// and G(input) written or added as stored, with the widening call's bits. That
// call computes the input's gradient in zeroed f32 scratch (0 + G: -0 becomes
// +0), rounds it and stores it, or adds it to the stored value and rounds the
// sum; so here operand 0 is absent (reads 0) and the store says which. A
// Slice reaches part of the input: the rest is zeroed, or (added to) gets its
// own + 0 first, as the widening call's add of the whole scratch does.
void bwd_view_io(CudaOpState& s, const OpCall& c) {
  ++s.io_calls;
  if (!s.io.dx[0].p) return;
  const ViewMap m = coalesced(view_map(c.model, c.v));
  const int64_t n = c.in_op(0).numel();
  const IoIn dy = io_in(c, s.io.dy);
  IoOut dx = io_out(c, s.io.dx[0]);
  PwGeom g;
  if (c.op.kind == OpKind::Expand) {
    if (!expand_sum_geom(m, g))
      throw InternalError(op_label(c.model, c.v) + ": a 16-bit Expand gradient whose map has no pointwise geometry");
    const IoIn none[3] = {};
    return pointwise_bwd_io(g, 0, none, IoIn{}, dy, dx, s.stream);
  }
  if (!add_back_geom(m, g))
    throw InternalError(op_label(c.model, c.v) + ": a 16-bit view gradient whose map has no pointwise geometry");
  const uint64_t size = dtype_size(c.in_op(0).dtype);
  if (c.op.kind == OpKind::Slice) {
    if (!dx.add) {
      CUDA_CHECK_THROW(cudaMemsetAsync(dx.p, 0, size * static_cast<std::size_t>(n), s.stream));
    } else {
      PwGeom whole;  // dx = 0 + dx over the whole input, stored: -0 to +0, every other value as it is
      (void)add_back_geom(ViewMap{{n}, {1}, 0}, whole);
      const IoIn x[3] = {IoIn{}, IoIn{dx.p, dx.t}, {}};
      pointwise_fwd_io(whole, x, IoOut{dx.p, dx.t, false}, s.stream);
    }
  }
  dx.p = static_cast<char*>(dx.p) + size * static_cast<uint64_t>(m.base);
  const IoIn x[3] = {IoIn{}, dy, {}};
  pointwise_fwd_io(g, x, dx, s.stream);
}
void bwd_view(CudaOpState& s, const OpCall& c) {
  if (s.io.active) return bwd_view_io(s, c);
  if (!c.dx(0)) return;
  const ViewMap m = coalesced(view_map(c.model, c.v));
  const int64_t n = c.in_op(0).numel();
  PwGeom g;
  if (c.op.kind == OpKind::Expand && expand_sum_geom(m, g)) {
    const float* none[3] = {nullptr, nullptr, nullptr};
    return pointwise_bwd(g, 0, none, nullptr, c.dy(), c.dx(0), c.acc(0), s.stream);
  }
  const bool one_to_one = add_back_geom(m, g);
  if (c.op.kind == OpKind::Expand && !one_to_one) {
    expand_bwd(c.dy(), c.dx(0), m.shape.data(), m.stride.data(), static_cast<int>(m.shape.size()), n, c.acc(0),
               s.stream);
    return;
  }
  // A Slice leaves the rest of the input without gradient.
  if (!c.acc(0)) CUDA_CHECK_THROW(cudaMemsetAsync(c.dx(0), 0, 4 * static_cast<size_t>(n), s.stream));
  if (one_to_one) {
    float* dst = c.dx(0) + m.base;
    const float* x[3] = {dst, c.dy(), nullptr};
    return pointwise_fwd(g, x, dst, s.stream);
  }
  strided_add(c.dy(), c.dx(0) + m.base, m.shape.data(), m.stride.data(), static_cast<int>(m.shape.size()), s.stream);
}

// MatMul: operands made contiguous where op_exec's matmul_dims says (aux:
// the copy PyTorch saves, expanded to the batch, made by the forward;
// scratch: gathered each time), then cuBLAS strided-batched GEMMs over
// gemm_runs' runs (a broadcast operand: batch stride 0). Stream order makes
// the runs that add into a broadcast operand's gradient sum in product order.
float* operand_copy(CudaOpState& s, const OpCall& c, const MatmulDims& d, std::size_t k) {
  const bool in_aux = k == 0 ? d.aux_a : d.aux_b;
  if (in_aux) return c.aux() + (k == 1 && d.aux_a ? d.batch * d.m * d.k : 0);
  const bool in_scratch = k == 0 ? d.scratch_a : d.scratch_b;
  return in_scratch ? s.scratch[k == 0 ? kMatmulA : kMatmulB] : nullptr;
}
const float* operand(CudaOpState& s, const OpCall& c, std::size_t k, float* copy, bool in_aux) {
  if (!copy) return c.in(k);
  if (!in_aux) {
    gather(s, c.in_op(k), c.in(k), copy);
    return copy;
  }
  copy_through(s, coalesced(matmul_expanded(c.model, c.v, k)), c.in(k), copy);
  return copy;
}
void run_gemms(CudaOpState& s, const std::vector<GemmRun>& runs, const float* x, const float* y, float* z, int64_t m,
               int64_t n, int64_t k, bool tx, bool ty) {
  const int64_t xs = m * k, ys = k * n, zs = m * n;
  for (const GemmRun& r : runs)
    gemm_strided(x + r.x * xs, y + r.y * ys, z + r.z * zs, r.count, m, n, k, tx, ty, r.accumulate, r.sx * xs,
                 r.sy * ys, r.sz * zs, s.cublas, s.stream);
}
// The same runs on 16-bit operands (s.lowp: core/exec/gemm_path.h), f32 results.
void run_gemms_lowp(CudaOpState& s, const std::vector<GemmRun>& runs, const void* x, const void* y, float* z,
                    int64_t m, int64_t n, int64_t k, bool tx, bool ty) {
  const int64_t xs = m * k, ys = k * n, zs = m * n;
  for (const GemmRun& r : runs)
    gemm_lowp(half_type(s.lowp), u16(x) + r.x * xs, u16(y) + r.y * ys, z + r.z * zs, r.count, m, n, k, tx, ty,
              r.accumulate ? 1.0f : 0.0f, s.cublas, s.stream, r.sx * xs, r.sy * ys, r.sz * zs);
}
// An operand copied to aux: made in f32 as the f32 path makes it (c.aux() is
// the mixed call's f32 scratch), then narrowed to its 16-bit place in aux(v)
// (s.lowp.x / x1), which the product reads.
void narrow_operand(CudaOpState& s, const float* f32, void* to, int64_t n) {
  if (s.lowp.dtype == DType::F16) f32_to_f16(f32, static_cast<uint16_t*>(to), n, s.stream);
  else f32_to_bf16(f32, static_cast<uint16_t*>(to), n, s.stream);
}
void fwd_matmul_lowp(CudaOpState& s, const OpCall& c, const MatmulDims& d) {
  ++s.lowp_calls;
  if (d.aux_a) narrow_operand(s, operand(s, c, 0, operand_copy(s, c, d, 0), true), s.lowp.x, d.batch * d.m * d.k);
  if (d.aux_b) narrow_operand(s, operand(s, c, 1, operand_copy(s, c, d, 1), true), s.lowp.x1, d.batch * d.k * d.n);
  run_gemms_lowp(s, gemm_runs(d.a_read(), d.b_read(), iota_index(d.batch), false), s.lowp.x, s.lowp.x1, c.out(), d.m,
                 d.n, d.k, false, false);
}
void bwd_matmul_lowp(CudaOpState& s, const OpCall& c, const MatmulDims& d) {
  ++s.lowp_calls;
  const std::vector<int64_t> each = iota_index(d.batch);
  if (c.dx(0))
    run_gemms_lowp(s, gemm_runs(each, d.b_read(), d.a_of, c.acc(0)), s.lowp.dy, s.lowp.x1, c.dx(0), d.m, d.k, d.n,
                   false, true);
  if (c.dx(1))
    run_gemms_lowp(s, gemm_runs(d.a_read(), each, d.b_of, c.acc(1)), s.lowp.x, s.lowp.dy, c.dx(1), d.k, d.n, d.m,
                   true, false);
}

void fwd_matmul(CudaOpState& s, const OpCall& c) {
  const MatmulDims d = matmul_dims(c.model, c.v);
  if (s.lowp.active()) return fwd_matmul_lowp(s, c, d);
  const float* a = operand(s, c, 0, operand_copy(s, c, d, 0), d.aux_a);
  const float* b = operand(s, c, 1, operand_copy(s, c, d, 1), d.aux_b);
  run_gemms(s, gemm_runs(d.a_read(), d.b_read(), iota_index(d.batch), false), a, b, c.out(), d.m, d.n, d.k, false,
            false);
}
void bwd_matmul(CudaOpState& s, const OpCall& c) {
  const MatmulDims d = matmul_dims(c.model, c.v);
  if (s.lowp.active()) return bwd_matmul_lowp(s, c, d);
  const float* a = d.aux_a ? operand_copy(s, c, d, 0) : operand(s, c, 0, operand_copy(s, c, d, 0), false);
  const float* b = d.aux_b ? operand_copy(s, c, d, 1) : operand(s, c, 1, operand_copy(s, c, d, 1), false);
  const std::vector<int64_t> each = iota_index(d.batch);
  // As the CPU's bwd_matmul: da_i = dc_i · b_iᵀ, db_i = a_iᵀ · dc_i.
  if (c.dx(0))
    run_gemms(s, gemm_runs(each, d.b_read(), d.a_of, c.acc(0)), c.dy(), b, c.dx(0), d.m, d.k, d.n, false, true);
  if (c.dx(1))
    run_gemms(s, gemm_runs(d.a_read(), each, d.b_of, c.acc(1)), a, c.dy(), c.dx(1), d.k, d.n, d.m, true, false);
}

// *Const, MaskedFill, Embedding: as the CPU's entries (cpu_ops.cpp).
const float* const_of(const CudaOpState& s, const OpCall& c) {
  return c.op.attrs->learned ? s.param(c.v, 0) : static_cast<const float*>(s.constant(c.v));
}
void fwd_by_const(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {  // lowp_io: a fixed constant only
    ++s.io_calls;
    return const_fwd_io(const_op(c.op.kind), io_in(c, s.io.in[0]), const_of(s, c), io_out(c, s.io.out), c.op.numel(),
                        constant_numel(c.op), s.stream);
  }
  const_fwd(const_op(c.op.kind), c.in(0), const_of(s, c), c.out(), c.op.numel(), constant_numel(c.op), s.stream);
}
void bwd_by_const(CudaOpState& s, const OpCall& c) {
  const int64_t cn = constant_numel(c.op);
  if (s.io.active) {
    if (c.op.attrs->learned)
      throw InternalError(op_label(c.model, c.v) + ": a learned constant's gradient in a 16-bit kernel");
    ++s.io_calls;
    if (c.dx(0))
      const_bwd_io(const_op(c.op.kind), io_in(c, s.io.dy), const_of(s, c), io_out(c, s.io.dx[0]), c.op.numel(), cn,
                   s.stream);
    return;
  }
  if (c.op.attrs->learned) const_add_param_grad(c.dy(), s.param_grad(c.v, 0), c.op.numel(), cn, s.stream);
  if (c.dx(0)) const_bwd(const_op(c.op.kind), c.dy(), const_of(s, c), c.dx(0), c.op.numel(), cn, c.acc(0), s.stream);
}

void fwd_masked_fill(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return masked_fill_fwd_io(io_in(c, s.io.in[0]), static_cast<const uint8_t*>(s.constant(c.v)), io_out(c, s.io.out),
                              c.op.numel(), constant_numel(c.op), c.op.attrs->fill, s.stream);
  }
  masked_fill_fwd(c.in(0), static_cast<const uint8_t*>(s.constant(c.v)), c.out(), c.op.numel(), constant_numel(c.op),
                  c.op.attrs->fill, s.stream);
}
void bwd_masked_fill(CudaOpState& s, const OpCall& c) {
  if (s.io.active && c.dx(0)) {
    ++s.io_calls;
    return masked_fill_bwd_io(io_in(c, s.io.dy), static_cast<const uint8_t*>(s.constant(c.v)), io_out(c, s.io.dx[0]),
                              c.op.numel(), constant_numel(c.op), s.stream);
  }
  if (c.dx(0))
    masked_fill_bwd(c.dy(), static_cast<const uint8_t*>(s.constant(c.v)), c.dx(0), c.op.numel(), constant_numel(c.op),
                    c.acc(0), s.stream);
}

void fwd_embedding(CudaOpState& s, const OpCall& c) {
  const Op& ids = c.in_op(0);
  if (ids.dtype == DType::I64)
    embedding_fwd(s.param(c.v, 0), static_cast<const int64_t*>(static_cast<const void*>(c.in(0))), c.out(), ids.numel(),
                  c.op.cols(), c.op.attrs->vocab, s.stream);
  else
    embedding_fwd(s.param(c.v, 0), static_cast<const int32_t*>(static_cast<const void*>(c.in(0))), c.out(), ids.numel(),
                  c.op.cols(), c.op.attrs->vocab, s.stream);
}
void bwd_embedding(CudaOpState& s, const OpCall& c) {
  const Op& ids = c.in_op(0);
  if (ids.dtype == DType::I64)
    embedding_bwd(c.dy(), static_cast<const int64_t*>(static_cast<const void*>(c.in(0))), s.param_grad(c.v, 0),
                  ids.numel(), c.op.cols(), c.op.attrs->vocab, s.stream, s.nondeterministic_backward);
  else
    embedding_bwd(c.dy(), static_cast<const int32_t*>(static_cast<const void*>(c.in(0))), s.param_grad(c.v, 0),
                  ids.numel(), c.op.cols(), c.op.attrs->vocab, s.stream, s.nondeterministic_backward);
}

// Attention: lse in aux, as the CPU's entries (cpu_ops.cpp); the additive
// mask, if the op has one, is its constant on the device.
cpu::SdpaGeom attention_geom(const CudaOpState& s, const OpCall& c) {
  cpu::SdpaGeom g = sdpa_geom(c.model, c.v);
  if (!c.op.attrs->const_shape.empty()) g.mask = static_cast<const float*>(s.constant(c.v));
  return g;
}
// On the 16-bit path (s.io: lowp_io) q, k, v, A(v), G(v) and the input
// gradients are the tensors as stored, read through the same strides; lse
// is aux(v) in f32 either way (the mixed call widens no aux of an Attention).
void fwd_attention(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    return sdpa_fwd_io(attention_geom(s, c), io_in(c, s.io.in[0]), io_in(c, s.io.in[1]), io_in(c, s.io.in[2]),
                       io_out(c, s.io.out), c.aux(), s.stream);
  }
  sdpa_fwd(attention_geom(s, c), c.in(0), c.in(1), c.in(2), c.out(), c.aux(), s.scratch[kAttention], s.stream);
}
void bwd_attention(CudaOpState& s, const OpCall& c) {
  if (s.io.active) {
    ++s.io_calls;
    IoOut dx[3];
    for (std::size_t k = 0; k < 3; ++k) {
      if (!c.dx(k)) continue;
      if (c.acc(k))  // the call tells the kernel to add only for an input given twice, which lowp_io refuses
        throw InternalError(op_label(c.model, c.v) + ": a 16-bit attention gradient the kernel is told to add to");
      dx[k] = io_out(c, s.io.dx[k]);
    }
    return sdpa_bwd_io(attention_geom(s, c), io_in(c, s.io.in[0]), io_in(c, s.io.in[1]), io_in(c, s.io.in[2]),
                       io_in(c, s.io.out), c.aux(), io_in(c, s.io.dy), dx[0], dx[1], dx[2], s.stream);
  }
  sdpa_bwd(attention_geom(s, c), c.in(0), c.in(1), c.in(2), c.self(), c.aux(), c.dy(), c.dx(0), c.dx(1), c.dx(2),
           c.acc(0), c.acc(1), c.acc(2), s.scratch[kAttention], s.stream);
}

// The pointwise family and the reductions (op_exec.h's pointwise_call, as the CPU's entries).
// On the 16-bit path (s.io) the inputs, A(v), G(v) and the input gradients
// are the stored tensors; a constant operand is the backend's f32 one (lowp_io
// takes no learned constant, whose parameter gradient sums f32 terms).
void io_operands(const OpCall& c, const PwCall& a, const IoOperands& io, IoIn (&x)[3]) {
  for (int k = 0; k < a.ops.arity; ++k) {
    const PwOperand& o = a.ops.at[k];
    if (o.src == PwOperand::Input) x[k] = a.x[k] ? io_in(c, io.in[o.input]) : IoIn{nullptr, IoType::F32};
    else x[k] = IoIn{a.x[k], IoType::F32};
  }
}
void fwd_pointwise(CudaOpState& s, const OpCall& c) {
  const PwCall a = pointwise_call(s, c, false);
  if (s.io.active) {
    ++s.io_calls;
    IoIn x[3] = {};
    io_operands(c, a, s.io, x);
    return pointwise_fwd_io(a.g, x, io_out(c, s.io.out), s.stream);
  }
  pointwise_fwd(a.g, a.x, c.out(), s.stream);
}
void bwd_pointwise(CudaOpState& s, const OpCall& c) {
  const PwCall a = pointwise_call(s, c, true);
  if (s.io.active) {
    ++s.io_calls;
    IoIn x[3] = {};
    io_operands(c, a, s.io, x);
    const IoIn y = a.y ? io_in(c, s.io.out) : IoIn{nullptr, IoType::F32};
    for (int k = 0; k < a.ops.arity; ++k) {
      const PwOperand& o = a.ops.at[k];
      if (o.src == PwOperand::Input && s.io.dx[o.input].p)
        pointwise_bwd_io(a.g, k, x, y, io_in(c, s.io.dy), io_out(c, s.io.dx[o.input]), s.stream);
    }
    return;
  }
  for_each_pointwise_grad(s, c, a.ops, [&](int k, float* dx, bool acc) {
    pointwise_bwd(a.g, k, a.x, a.y, c.dy(), dx, acc, s.stream);
  });
}
void fwd_reduce(CudaOpState& s, const OpCall& c) { reduce_fwd(reduce_geom(c.model, c.v), c.in(0), c.out(), s.stream); }
void bwd_reduce(CudaOpState& s, const OpCall& c) {
  if (!c.dx(0)) return;
  const bool amax = c.op.attrs->fn == static_cast<uint8_t>(pw::ReduceFn::Amax);
  reduce_bwd(reduce_geom(c.model, c.v), amax ? c.in(0) : nullptr, amax ? c.self() : nullptr, c.dy(), c.dx(0), c.acc(0),
             s.stream);
}

// A TopK's indices have no gradient; a Gather's reach its input x alone.
void fwd_topk(CudaOpState& s, const OpCall& c) {
  topk_fwd(topk_geom(c.model, c.v), c.in(0), reinterpret_cast<int64_t*>(c.out()), s.stream);
}
void bwd_topk(CudaOpState&, const OpCall&) {}
// A running sum; its input's gradient the reversed one (it reads no tensor).
void fwd_cumsum(CudaOpState& s, const OpCall& c) {
  cumsum_fwd(cumsum_geom(c.model, c.v), c.in(0), c.out(), s.stream);
}
void bwd_cumsum(CudaOpState& s, const OpCall& c) {
  if (c.dx(0)) cumsum_bwd(cumsum_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0), s.stream);
}
void fwd_gather(CudaOpState& s, const OpCall& c) {
  gather_fwd(gather_geom(c.model, c.v), c.in(0), reinterpret_cast<const int64_t*>(c.in(1)), c.out(), s.stream);
}
void bwd_gather(CudaOpState& s, const OpCall& c) {
  if (c.dx(0))
    gather_bwd(gather_geom(c.model, c.v), reinterpret_cast<const int64_t*>(c.in(1)), c.dy(), c.dx(0), c.acc(0),
               s.stream);
}

#define REMAT_CUDA_ROW(Kind, entry, ...) KernelEntry<CudaOpState>{OpKind::Kind, &fwd_##entry, &bwd_##entry},
constexpr std::array kCudaKernels = {REMAT_EXEC_KINDS(REMAT_CUDA_ROW)};
#undef REMAT_CUDA_ROW

}  // namespace

void cuda_forward(CudaOpState& s, const OpCall& c) { kernel_for(kCudaKernels, c, "cuda").fwd(s, c); }

void cuda_backward(CudaOpState& s, const OpCall& c) {
  if (is_integer(c.op.dtype)) return;  // integers (a TopK's indices, views of them) pass no gradient on
  if (!c.dy() && !is_loss(c.op.kind)) throw InternalError(op_label(c.model, c.v) + ": backward without its gradient G");
  kernel_for(kCudaKernels, c, "cuda").bwd(s, c);
}

}  // namespace remat::cuda
