#include "core/exec/cpu_ops.h"

#include <array>
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/base/errors.h"
#include "core/exec/exec_kinds.h"
#include "core/exec/pad_exec.h"
#include "core/kernels/cpu_kernels.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"

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
  const float* b = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;
  cpu::linear_fwd(c.in(0), s.param(c.v, 0), b, c.out(), x.rows(), x.cols(), c.op.cols());
}
void bwd_linear(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  cpu::linear_bwd(c.in(0), s.param(c.v, 0), c.dy(), dx_or_discard(s, c), s.param_grad(c.v, 0), db, x.rows(),
                  x.cols(), c.op.cols(), c.dx(0) && c.acc(0));
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

void fwd_activation(CpuOpState&, const OpCall& c) {
  cpu::act_fwd(kernel_act(c.op.kind), c.in(0), c.out(), c.op.numel());
}
void bwd_activation(CpuOpState&, const OpCall& c) {
  if (!c.dx(0)) return;
  // ReLU, Tanh and Sigmoid differentiate from their output, GELU and SiLU from
  // their input (op_rules' saved sets).
  const bool from_input = c.op.kind == OpKind::GELU || c.op.kind == OpKind::SiLU;
  const float* x_or_y = from_input ? c.in(0) : c.self();
  cpu::act_bwd(kernel_act(c.op.kind), x_or_y, c.dy(), c.dx(0), c.op.numel(), c.acc(0));
}

// aux(v) holds the row statistics (2, rows); the backward reads x and them, not y.
void fwd_layernorm(CpuOpState& s, const OpCall& c) {
  cpu::layernorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.op.rows(), c.op.cols(),
                     layernorm_eps(c.op));
}
void bwd_layernorm(CpuOpState& s, const OpCall& c) {
  cpu::layernorm_bwd(c.in(0), c.aux(), norm_param(s, c, 0), c.dy(), dx_or_discard(s, c),
                     norm_param_grad(s, c, 0), norm_param_grad(s, c, 1), c.op.rows(), c.op.cols(), c.dx(0) && c.acc(0));
}

void fwd_add(CpuOpState&, const OpCall& c) {
  if (reads_strided(c.model, c.v)) {
    const float* x[3] = {c.in(0), c.in(1), nullptr};
    return cpu::pointwise_fwd(strided_add_geom(c.model, c.v), x, c.out());
  }
  cpu::add_fwd(c.in(0), c.in(1), c.out(), c.op.numel());
}
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

// The losses against a target of the input's shape (MSE, BCE on logits):
// the loss of the input, after autocast's f32 copy of a low-precision input,
// which the backward then reads (aux) instead of it.
float target_loss_fwd(CpuOpState& s, const OpCall& c, float (*loss)(const float*, const float*, int64_t)) {
  const int64_t n = c.in_op(0).numel();
  if (s.target_n != static_cast<uint64_t>(n))
    throw InternalError(op_label(c.model, c.v) + ": no " + std::string(kind_name(c.op.kind)) + " target loaded");
  if (target_loss_keeps_f32_input(c.op)) std::memcpy(c.aux(), c.in(0), 4 * static_cast<std::size_t>(n));
  return loss(c.in(0), s.target, n);
}
void target_loss_bwd(CpuOpState& s, const OpCall& c, void (*grad)(const float*, const float*, float*, int64_t, bool)) {
  const float* x = target_loss_keeps_f32_input(c.op) ? c.aux() : c.in(0);
  if (c.dx(0)) grad(x, s.target, c.dx(0), c.in_op(0).numel(), c.acc(0));
}

void fwd_mse(CpuOpState& s, const OpCall& c) { store_loss(s, c, target_loss_fwd(s, c, cpu::mse_fwd)); }
void bwd_mse(CpuOpState& s, const OpCall& c) { target_loss_bwd(s, c, cpu::mse_bwd); }
void fwd_bce_logits(CpuOpState& s, const OpCall& c) { store_loss(s, c, target_loss_fwd(s, c, cpu::bce_logits_fwd)); }
void bwd_bce_logits(CpuOpState& s, const OpCall& c) { target_loss_bwd(s, c, cpu::bce_logits_bwd); }

void fwd_softmax_ce(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  const double eps = c.op.attrs->label_smoothing;
  if (s.labels_n != static_cast<uint64_t>(x.rows())) throw InternalError(op_label(c.model, c.v) + ": no labels loaded");
  store_loss(s, c,
             ce_keeps_log_probs(c.op) ? cpu::softmax_ce_fwd_keep_logp(c.in(0), s.labels, c.aux(), x.rows(), x.cols(), eps)
                                      : cpu::softmax_ce_fwd(c.in(0), s.labels, x.rows(), x.cols(), eps));
}
void bwd_softmax_ce(CpuOpState& s, const OpCall& c) {
  const Op& x = c.in_op(0);
  const double eps = c.op.attrs->label_smoothing;
  if (!c.dx(0)) return;
  if (ce_keeps_log_probs(c.op))
    cpu::softmax_ce_bwd_from_logp(c.aux(), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0), eps);
  else
    cpu::softmax_ce_bwd(c.in(0), s.labels, c.dx(0), x.rows(), x.cols(), c.acc(0), eps);
}

void fwd_conv(CpuOpState& s, const OpCall& c) {
  const float* bias = c.op.attrs->bias ? s.param(c.v, 1) : nullptr;
  cpu::conv2d_fwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), bias, c.out(), s.scratch[kConvColumns]);
}
void bwd_conv(CpuOpState& s, const OpCall& c) {
  float* db = c.op.attrs->bias ? s.param_grad(c.v, 1) : nullptr;
  // No dx for the model input: the kernel then skips that product.
  cpu::conv2d_bwd(conv_geom(c.model, c.v), c.in(0), s.param(c.v, 0), c.dy(), c.dx(0), s.param_grad(c.v, 0), db,
                  c.dx(0) && c.acc(0), s.scratch[kConvColumns]);
}

// A ConvTranspose runs the convolution it is the gradient of (conv_transpose_geom):
// forward is its input gradient (x as its dy), the backward its forward (dx
// from dy) and its weight gradient (dy as its input, x as its dy).
void fwd_conv_transpose(CpuOpState& s, const OpCall& c) {
  const cpu::ConvGeom g = conv_transpose_geom(c.model, c.v);
  cpu::conv2d_bwd(g, nullptr, s.param(c.v, 0), c.in(0), c.out(), nullptr, nullptr, false, s.scratch[kConvColumns]);
  if (!c.op.attrs->bias) return;
  const float* b = s.param(c.v, 1);
  const int64_t hw = g.h * g.w;
  float* y = c.out();
  for (int64_t img = 0; img < g.n; ++img)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t i = 0; i < hw; ++i) y[(img * g.c + ch) * hw + i] += b[ch];
}
void bwd_conv_transpose(CpuOpState& s, const OpCall& c) {
  const cpu::ConvGeom g = conv_transpose_geom(c.model, c.v);
  cpu::conv2d_bwd(g, c.dy(), s.param(c.v, 0), c.in(0), nullptr, s.param_grad(c.v, 0), nullptr, false,
                  s.scratch[kConvColumns]);
  if (c.dx(0)) {
    // Added into another reader's gradient: computed apart first.
    float* dx = c.acc(0) ? s.scratch[kDiscardedDx] : c.dx(0);
    cpu::conv2d_fwd(g, c.dy(), s.param(c.v, 0), nullptr, dx, s.scratch[kConvColumns]);
    if (c.acc(0)) cpu::add_into(dx, c.dx(0), c.in_op(0).numel(), true);
  }
  if (!c.op.attrs->bias) return;
  float* db = s.param_grad(c.v, 1);
  const int64_t hw = g.h * g.w;
  const float* dy = c.dy();
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double sum = 0.0;
    for (int64_t img = 0; img < g.n; ++img)
      for (int64_t i = 0; i < hw; ++i) sum += dy[(img * g.c + ch) * hw + i];
    db[ch] += static_cast<float>(sum);
  }
}

// aux(v): the mean of each (sample, group), then their rstd; eps the model's.
void fwd_groupnorm(CpuOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const int64_t groups = c.op.attrs->groups;
  cpu::groupnorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.aux() + d.n * groups, d.n, d.c,
                     d.hw, groups, layernorm_eps(c.op));
}
void bwd_groupnorm(CpuOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  const int64_t groups = c.op.attrs->groups;
  cpu::groupnorm_bwd(c.in(0), c.dy(), norm_param(s, c, 0), c.aux(), c.aux() + d.n * groups, dx_or_discard(s, c),
                     norm_param_grad(s, c, 0), norm_param_grad(s, c, 1), d.n, d.c, d.hw, groups, c.dx(0) && c.acc(0));
}

void fwd_upsample(CpuOpState&, const OpCall& c) {
  const UpsampleDims d = upsample_dims(c.model, c.v);
  cpu::upsample_fwd(c.in(0), c.out(), d.planes, d.ih, d.iw, d.oh, d.ow, c.op.attrs->bilinear, c.op.attrs->align_corners);
}
void bwd_upsample(CpuOpState&, const OpCall& c) {
  if (!c.dx(0)) return;
  const UpsampleDims d = upsample_dims(c.model, c.v);
  cpu::upsample_bwd(c.dy(), c.dx(0), d.planes, d.ih, d.iw, d.oh, d.ow, c.op.attrs->bilinear, c.op.attrs->align_corners,
                    c.acc(0));
}

void fwd_pad(CpuOpState&, const OpCall& c) { cpu::pad_fwd(pad_geom(c.model, c.v), c.in(0), c.out()); }
void bwd_pad(CpuOpState&, const OpCall& c) {
  if (c.dx(0)) cpu::pad_bwd(pad_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0));
}

// aux(v) holds the batch mean then the inverse std, one float per channel.
// eps: the model's (op_exec.h); the running statistics are not kept (op_exec).
void fwd_batchnorm(CpuOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  cpu::batchnorm_fwd(c.in(0), norm_param(s, c, 0), norm_param(s, c, 1), c.out(), c.aux(), c.aux() + d.c, nullptr, nullptr, d.n,
                     d.c, d.hw, batchnorm_eps(c.op), 0.1f);
}
void bwd_batchnorm(CpuOpState& s, const OpCall& c) {
  const NCS d = ncs_of(c.op);
  cpu::batchnorm_bwd(c.in(0), c.dy(), norm_param(s, c, 0), c.aux(), c.aux() + d.c, dx_or_discard(s, c),
                     norm_param_grad(s, c, 0), norm_param_grad(s, c, 1), d.n, d.c, d.hw, c.dx(0) && c.acc(0));
}

// aux(v) holds the int64 index of each output's maximum in its plane.
void fwd_maxpool(CpuOpState&, const OpCall& c) {
  cpu::maxpool2d_fwd(pool_geom(c.model, c.v), c.in(0), c.out(), reinterpret_cast<int64_t*>(c.aux()));
}
void bwd_maxpool(CpuOpState&, const OpCall& c) {
  if (c.dx(0))
    cpu::maxpool2d_bwd(pool_geom(c.model, c.v), c.dy(), reinterpret_cast<const int64_t*>(c.aux()), c.dx(0), c.acc(0));
}

void fwd_avgpool(CpuOpState&, const OpCall& c) { cpu::avgpool2d_fwd(pool_geom(c.model, c.v), c.in(0), c.out()); }
void bwd_avgpool(CpuOpState&, const OpCall& c) {
  if (c.dx(0)) cpu::avgpool2d_bwd(pool_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0));
}

void fwd_global_avgpool(CpuOpState&, const OpCall& c) {
  const NCS d = ncs_of(c.in_op(0));
  cpu::global_avgpool_fwd(c.in(0), c.out(), d.n * d.c, d.hw);
}
void bwd_global_avgpool(CpuOpState&, const OpCall& c) {
  const NCS d = ncs_of(c.in_op(0));
  if (c.dx(0)) cpu::global_avgpool_bwd(c.dy(), c.dx(0), d.n * d.c, d.hw, c.acc(0));
}

void fwd_softmax(CpuOpState&, const OpCall& c) { cpu::softmax_fwd(c.in(0), c.out(), c.op.rows(), c.op.cols()); }
void bwd_softmax(CpuOpState&, const OpCall& c) {
  if (c.dx(0)) cpu::softmax_bwd(c.self(), c.dy(), c.dx(0), c.op.rows(), c.op.cols(), c.acc(0));
}

// A constant piece (a learned class token) is broadcast into scratch and
// concatenated like an input; its share of dy comes back there and is summed
// over the broadcast into the parameter's gradient, in the piece's order.
void fwd_concat(CpuOpState& s, const OpCall& c) {
  // A strided input is copied through its strides into its slice, as the
  // family's identity, and so is a constant piece from scratch.
  if (reads_strided(c.model, c.v)) {
    for (std::size_t k = 0; k < c.op.inputs.size(); ++k) {
      int64_t at = 0;
      const cpu::PwGeom g = concat_piece_geom(c.model, c.v, k, at);
      const float* x[3] = {c.in(k), nullptr, nullptr};
      cpu::pointwise_fwd(g, x, c.out() + at);
    }
    if (c.op.attrs->const_at >= 0) {
      const float* p = s.param(c.v, 0);
      float* piece = s.scratch[kConcatPiece];
      for_each_mapped(concat_piece_map(c.model, c.v), [&](int64_t i, int64_t at) { piece[i] = p[at]; });
      int64_t at = 0;
      const cpu::PwGeom g = concat_const_geom(c.model, c.v, at);
      const float* x[3] = {piece, nullptr, nullptr};
      cpu::pointwise_fwd(g, x, c.out() + at);
    }
    return;
  }
  const ConcatDims d = concat_dims(c.model, c.v);
  std::vector<const float*> xs;
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k) xs.push_back(c.in(k));
  if (d.piece >= 0) {
    const float* p = s.param(c.v, 0);
    float* piece = s.scratch[kConcatPiece];
    for_each_mapped(concat_piece_map(c.model, c.v), [&](int64_t i, int64_t at) { piece[i] = p[at]; });
    xs.insert(xs.begin() + d.piece, piece);
  }
  cpu::concat_fwd(xs.data(), d.widths.data(), static_cast<int64_t>(xs.size()), c.out(), d.outer, d.inner);
}
void bwd_concat(CpuOpState& s, const OpCall& c) {
  const ConcatDims d = concat_dims(c.model, c.v);
  std::vector<float*> dxs;  // nullptr: an input without gradient, skipped
  std::vector<uint8_t> acc;
  for (std::size_t k = 0; k < c.op.inputs.size(); ++k) {
    dxs.push_back(c.dx(k));
    acc.push_back(c.acc(k) ? 1 : 0);
  }
  if (d.piece >= 0) {
    dxs.insert(dxs.begin() + d.piece, s.scratch[kConcatPiece]);
    acc.insert(acc.begin() + d.piece, 0);
  }
  cpu::concat_bwd(c.dy(), dxs.data(), d.widths.data(), static_cast<int64_t>(dxs.size()), d.outer, d.inner, acc.data());
  if (d.piece >= 0) {
    const float* piece = s.scratch[kConcatPiece];
    float* g = s.param_grad(c.v, 0);
    for_each_mapped(concat_piece_map(c.model, c.v), [&](int64_t i, int64_t at) { g[at] += piece[i]; });
  }
}

// A view computes nothing forward (the executor points it into its input's
// storage). A copying Reshape gathers its input, whatever its strides, into
// its own contiguous storage; the logical order does not change.
void fwd_reshape(CpuOpState&, const OpCall& c) {
  if (c.op.view) return;
  const Op& x = c.in_op(0);
  const ViewMap strided{x.shape, layout_of(x), 0};
  const float* src = c.in(0);
  float* dst = c.out();
  for_each_mapped(strided, [&](int64_t i, int64_t at) { dst[i] = src[at]; });
}
void fwd_view(CpuOpState&, const OpCall&) {}

// G(view) is a tensor of its own in the view's logical shape: scatter it back
// onto G(input) through the view's map (a Reshape's map is the identity).
void view_bwd(const OpCall& c) {
  float* dx = c.dx(0);
  if (!dx) return;
  const float* dy = c.dy();
  const int64_t n = c.in_op(0).numel();
  if (c.op.kind == OpKind::Reshape) {
    cpu::add_into(dy, dx, n, c.acc(0));
    return;
  }
  if (!c.acc(0)) std::fill(dx, dx + n, 0.0f);  // a Slice leaves the rest of the input without gradient
  for_each_mapped(view_map(c.model, c.v), [&](int64_t i, int64_t at) { dx[at] += dy[i]; });
}
void bwd_reshape(CpuOpState&, const OpCall& c) { view_bwd(c); }
void bwd_view(CpuOpState&, const OpCall& c) { view_bwd(c); }

// Operand `k` of a MatMul as contiguous matrices: the input itself, or its
// elements gathered into `copy` in logical order (aux: expanded to the whole
// batch; scratch: as they are).
const float* operand(const OpCall& c, std::size_t k, float* copy, bool in_aux) {
  if (!copy) return c.in(k);
  const Op& x = c.in_op(k);
  const float* src = c.in(k);
  if (!in_aux) {
    for_each_mapped(ViewMap{x.shape, layout_of(x), 0}, [&](int64_t i, int64_t at) { copy[i] = src[at]; });
    return copy;
  }
  for_each_mapped(matmul_expanded(c.model, c.v, k), [&](int64_t i, int64_t at) { copy[i] = src[at]; });
  return copy;
}
// Where operand k's copy goes (nullptr: none) and whether it already holds it
// (aux, filled by the forward: the backward reads it as PyTorch reads its saved copy).
float* operand_copy(CpuOpState& s, const OpCall& c, const MatmulDims& d, std::size_t k) {
  const bool in_aux = k == 0 ? d.aux_a : d.aux_b;
  if (in_aux) return c.aux() + (k == 1 && d.aux_a ? d.batch * d.m * d.k : 0);
  const bool in_scratch = k == 0 ? d.scratch_a : d.scratch_b;
  return in_scratch ? s.scratch[k == 0 ? kMatmulA : kMatmulB] : nullptr;
}

// z = or += op(x)·op(y) over gemm_runs' runs; x, y and z hold matrices of
// xs, ys and zs floats.
void run_gemms(const std::vector<GemmRun>& runs, const float* x, const float* y, float* z, int64_t m, int64_t n,
               int64_t k, bool tx, bool ty) {
  const int64_t xs = m * k, ys = k * n, zs = m * n;
  for (const GemmRun& r : runs)
    cpu::gemm_strided(x + r.x * xs, y + r.y * ys, z + r.z * zs, r.count, m, n, k, tx, ty, r.accumulate, r.sx * xs,
                      r.sy * ys, r.sz * zs);
}

void fwd_matmul(CpuOpState& s, const OpCall& c) {
  const MatmulDims d = matmul_dims(c.model, c.v);
  const float* a = operand(c, 0, operand_copy(s, c, d, 0), d.aux_a);
  const float* b = operand(c, 1, operand_copy(s, c, d, 1), d.aux_b);
  run_gemms(gemm_runs(d.a_read(), d.b_read(), iota_index(d.batch), false), a, b, c.out(), d.m, d.n, d.k, false, false);
}
void bwd_matmul(CpuOpState& s, const OpCall& c) {
  const MatmulDims d = matmul_dims(c.model, c.v);
  // aux copies were made by the forward; scratch copies are made again.
  const float* a = d.aux_a ? operand_copy(s, c, d, 0) : operand(c, 0, operand_copy(s, c, d, 0), false);
  const float* b = d.aux_b ? operand_copy(s, c, d, 1) : operand(c, 1, operand_copy(s, c, d, 1), false);
  const std::vector<int64_t> each = iota_index(d.batch);
  // da_i (m, k) = dc_i · b_iᵀ; db_i (k, n) = a_iᵀ · dc_i; a broadcast operand's
  // products add into the same matrix of its gradient.
  if (c.dx(0)) run_gemms(gemm_runs(each, d.b_read(), d.a_of, c.acc(0)), c.dy(), b, c.dx(0), d.m, d.k, d.n, false, true);
  if (c.dx(1)) run_gemms(gemm_runs(d.a_read(), each, d.b_of, c.acc(1)), a, c.dy(), c.dx(1), d.k, d.n, d.m, true, false);
}

// Attention: lse in aux (op_rules' executable checks it holds a float per row).
// The additive mask, if the op has one, is its constant.
cpu::SdpaGeom attention_geom(const CpuOpState& s, const OpCall& c) {
  cpu::SdpaGeom g = sdpa_geom(c.model, c.v);
  if (!c.op.attrs->const_shape.empty()) g.mask = static_cast<const float*>(s.constant(c.v));
  return g;
}
void fwd_attention(CpuOpState& s, const OpCall& c) {
  cpu::sdpa_fwd(attention_geom(s, c), c.in(0), c.in(1), c.in(2), c.out(), c.aux(), s.scratch[kAttention]);
}
void bwd_attention(CpuOpState& s, const OpCall& c) {
  cpu::sdpa_bwd(attention_geom(s, c), c.in(0), c.in(1), c.in(2), c.self(), c.aux(), c.dy(), c.dx(0), c.dx(1),
                c.dx(2), c.acc(0), c.acc(1), c.acc(2), s.scratch[kAttention]);
}

// *Const: the constant repeats over the output (op_rules' executable checks it).
void fwd_by_const(CpuOpState& s, const OpCall& c) {
  const float* k = c.op.attrs->learned ? s.param(c.v, 0) : static_cast<const float*>(s.constant(c.v));
  cpu::const_fwd(const_op(c.op.kind), c.in(0), k, c.out(), c.op.numel(), constant_numel(c.op));
}
void bwd_by_const(CpuOpState& s, const OpCall& c) {
  const int64_t cn = constant_numel(c.op);
  if (c.op.attrs->learned) cpu::const_add_param_grad(c.dy(), s.param_grad(c.v, 0), c.op.numel(), cn);
  const float* k = c.op.attrs->learned ? s.param(c.v, 0) : static_cast<const float*>(s.constant(c.v));
  if (c.dx(0)) cpu::const_bwd(const_op(c.op.kind), c.dy(), k, c.dx(0), c.op.numel(), cn, c.acc(0));
}

void fwd_masked_fill(CpuOpState& s, const OpCall& c) {
  cpu::masked_fill_fwd(c.in(0), static_cast<const uint8_t*>(s.constant(c.v)), c.out(), c.op.numel(),
                       constant_numel(c.op), c.op.attrs->fill);
}
void bwd_masked_fill(CpuOpState& s, const OpCall& c) {
  if (c.dx(0))
    cpu::masked_fill_bwd(c.dy(), static_cast<const uint8_t*>(s.constant(c.v)), c.dx(0), c.op.numel(),
                         constant_numel(c.op), c.acc(0));
}

// The ids are the input's integers (int32 or int64); they have no gradient.
void fwd_embedding(CpuOpState& s, const OpCall& c) {
  const Op& ids = c.in_op(0);
  const void* idx = c.in(0);
  if (ids.dtype == DType::I64)
    cpu::embedding_fwd(s.param(c.v, 0), static_cast<const int64_t*>(idx), c.out(), ids.numel(), c.op.cols(), c.op.attrs->vocab);
  else
    cpu::embedding_fwd(s.param(c.v, 0), static_cast<const int32_t*>(idx), c.out(), ids.numel(), c.op.cols(), c.op.attrs->vocab);
}
void bwd_embedding(CpuOpState& s, const OpCall& c) {
  const Op& ids = c.in_op(0);
  const void* idx = c.in(0);
  if (ids.dtype == DType::I64)
    cpu::embedding_bwd(c.dy(), static_cast<const int64_t*>(idx), s.param_grad(c.v, 0), ids.numel(), c.op.cols(), c.op.attrs->vocab);
  else
    cpu::embedding_bwd(c.dy(), static_cast<const int32_t*>(idx), s.param_grad(c.v, 0), ids.numel(), c.op.cols(), c.op.attrs->vocab);
}

// The pointwise family (op_exec.h's pointwise_call says which pointer is which).
void fwd_pointwise(CpuOpState& s, const OpCall& c) {
  const PwCall a = pointwise_call(s, c, false);
  cpu::pointwise_fwd(a.g, a.x, c.out());
}
void bwd_pointwise(CpuOpState& s, const OpCall& c) {
  const PwCall a = pointwise_call(s, c, true);
  for_each_pointwise_grad(s, c, a.ops, [&](int k, float* dx, bool acc) {
    cpu::pointwise_bwd(a.g, k, a.x, a.y, c.dy(), dx, acc);
  });
}

void fwd_reduce(CpuOpState&, const OpCall& c) { cpu::reduce_fwd(reduce_geom(c.model, c.v), c.in(0), c.out()); }
void bwd_reduce(CpuOpState&, const OpCall& c) {
  if (!c.dx(0)) return;
  const bool amax = c.op.attrs->fn == static_cast<uint8_t>(pw::ReduceFn::Amax);
  cpu::reduce_bwd(reduce_geom(c.model, c.v), amax ? c.in(0) : nullptr, amax ? c.self() : nullptr, c.dy(), c.dx(0),
                  c.acc(0));
}

// A TopK's indices have no gradient; a Gather's reach its input x alone.
void fwd_topk(CpuOpState&, const OpCall& c) {
  cpu::topk_fwd(topk_geom(c.model, c.v), c.in(0), reinterpret_cast<int64_t*>(c.out()));
}
void bwd_topk(CpuOpState&, const OpCall&) {}
// A running sum; its input's gradient the reversed one (it reads no tensor).
void fwd_cumsum(CpuOpState&, const OpCall& c) { cpu::cumsum_fwd(cumsum_geom(c.model, c.v), c.in(0), c.out()); }
void bwd_cumsum(CpuOpState&, const OpCall& c) {
  if (c.dx(0)) cpu::cumsum_bwd(cumsum_geom(c.model, c.v), c.dy(), c.dx(0), c.acc(0));
}
void fwd_gather(CpuOpState&, const OpCall& c) {
  cpu::gather_fwd(gather_geom(c.model, c.v), c.in(0), reinterpret_cast<const int64_t*>(c.in(1)), c.out());
}
void bwd_gather(CpuOpState&, const OpCall& c) {
  if (c.dx(0))
    cpu::gather_bwd(gather_geom(c.model, c.v), reinterpret_cast<const int64_t*>(c.in(1)), c.dy(), c.dx(0), c.acc(0));
}

#define REMAT_CPU_ROW(Kind, entry, ...) KernelEntry<CpuOpState>{OpKind::Kind, &fwd_##entry, &bwd_##entry},
constexpr std::array kCpuKernels = {REMAT_EXEC_KINDS(REMAT_CPU_ROW)};
#undef REMAT_CPU_ROW

}  // namespace

void cpu_forward(CpuOpState& s, const OpCall& c) { kernel_for(kCpuKernels, c, "cpu").fwd(s, c); }

void cpu_backward(CpuOpState& s, const OpCall& c) {
  if (is_integer(c.op.dtype)) return;  // integers (a TopK's indices, views of them) pass no gradient on
  if (!c.dy() && !is_loss(c.op.kind)) throw InternalError(op_label(c.model, c.v) + ": backward without its gradient G");
  kernel_for(kCpuKernels, c, "cpu").bwd(s, c);
}

}  // namespace remat
