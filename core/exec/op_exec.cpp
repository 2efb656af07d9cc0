#include "core/exec/op_exec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/exec/exec_kinds.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

// ---- Parameter tensors per entry ---------------------------------------------

std::vector<ParamSpec> linear_params(const Model& m, int v) {
  const Op& op = m.op(v);
  const int64_t in = m.op(op.inputs.at(0)).cols();
  return {{"weight", {op.cols(), in}, ParamInit::FanIn}, {"bias", {op.cols()}, ParamInit::FanIn}};
}
// A Linear without bias (`"bias": false`, GPT's vocabulary projection) has no bias tensor, as in PyTorch.
std::vector<ParamSpec> params_linear(const Model& m, int v) {
  std::vector<ParamSpec> p = linear_params(m, v);
  if (!m.op(v).attrs->bias) p.pop_back();
  return p;
}
std::vector<ParamSpec> params_dense(const Model& m, int v) { return linear_params(m, v); }
// A norm without affine parameters (affine false) has none.
std::vector<ParamSpec> params_layernorm(const Model& m, int v) {
  if (!m.op(v).attrs->affine) return {};
  const int64_t cols = m.op(v).cols();
  return {{"gamma", {cols}, ParamInit::NearOne}, {"beta", {cols}, ParamInit::NearZero}};
}
std::vector<ParamSpec> params_conv(const Model& m, int v) {
  const Op& op = m.op(v);
  std::vector<int64_t> w = {op.attrs->channels, m.op(op.inputs.at(0)).shape.at(1) / op.attrs->groups};
  w.insert(w.end(), op.attrs->kernel.begin(), op.attrs->kernel.end());
  std::vector<ParamSpec> out = {{"weight", std::move(w), ParamInit::FanIn}};
  if (op.attrs->bias) out.push_back({"bias", {op.attrs->channels}, ParamInit::FanIn});
  return out;
}
// Weight (C, channels/groups, kernel...) as nn.ConvTranspose2d's; fan-in is
// slot 0's shape without its first dimension, PyTorch's too.
std::vector<ParamSpec> params_conv_transpose(const Model& m, int v) {
  const Op& op = m.op(v);
  std::vector<int64_t> w = {m.op(op.inputs.at(0)).shape.at(1), op.attrs->channels / op.attrs->groups};
  w.insert(w.end(), op.attrs->kernel.begin(), op.attrs->kernel.end());
  std::vector<ParamSpec> out = {{"weight", std::move(w), ParamInit::FanIn}};
  if (op.attrs->bias) out.push_back({"bias", {op.attrs->channels}, ParamInit::FanIn});
  return out;
}
std::vector<ParamSpec> params_groupnorm(const Model& m, int v) {
  if (!m.op(v).attrs->affine) return {};
  const int64_t c = m.op(v).shape.at(1);
  return {{"gamma", {c}, ParamInit::NearOne}, {"beta", {c}, ParamInit::NearZero}};
}
// Batch statistics only: the running statistics (buffers, no gradient) are
// not kept, as no loss or gradient of a training step reads them.
std::vector<ParamSpec> params_batchnorm(const Model& m, int v) {
  if (!m.op(v).attrs->affine) return {};
  const int64_t c = m.op(v).shape.at(1);
  return {{"gamma", {c}, ParamInit::NearOne}, {"beta", {c}, ParamInit::NearZero}};
}
// The table (vocab, dim), as nn.Embedding's weight.
std::vector<ParamSpec> params_embedding(const Model& m, int v) {
  const Op& op = m.op(v);
  return {{"weight", {op.attrs->vocab, op.cols()}, ParamInit::NearZero}};
}
// A Concat's learned piece (a class token) is a parameter of its own shape.
std::vector<ParamSpec> params_concat(const Model& m, int v) {
  const Op& op = m.op(v);
  if (op.attrs->const_at < 0 || !op.attrs->learned) return {};
  return {{"weight", op.attrs->const_shape, ParamInit::NearZero}};
}
// A learned added constant (a position table) is a parameter of its own shape.
std::vector<ParamSpec> params_by_const(const Model& m, int v) {
  const Op& op = m.op(v);
  if (!op.attrs->learned) return {};
  const auto fn = static_cast<pw::Fn>(op.attrs->fn);
  const bool scale = fn == pw::Fn::Mul || fn == pw::Fn::Div;  // a scale starts near 1, anything else near 0
  return {{"weight", op.attrs->const_shape, scale ? ParamInit::NearOne : ParamInit::NearZero}};
}
// A Pointwise op's learned constant (a layer scale, an RMSNorm weight): a
// parameter of the constant's shape; its values, when the file gives them,
// are the initial ones (make_host_data).
std::vector<ParamSpec> params_pointwise(const Model& m, int v) {
  const Op& op = m.op(v);
  if (!op.attrs->learned) return {};
  const auto fn = static_cast<pw::Fn>(op.attrs->fn);
  const bool scale = fn == pw::Fn::Mul || fn == pw::Fn::Div;  // a scale starts near 1, anything else near 0
  return {{"weight", op.attrs->const_shape, scale ? ParamInit::NearOne : ParamInit::NearZero}};
}
std::vector<ParamSpec> params_none(const Model&, int) { return {}; }
std::vector<ParamSpec> params_activation(const Model&, int) { return {}; }
std::vector<ParamSpec> params_add(const Model&, int) { return {}; }
std::vector<ParamSpec> params_dropout(const Model&, int) { return {}; }
std::vector<ParamSpec> params_mse(const Model&, int) { return {}; }
std::vector<ParamSpec> params_softmax_ce(const Model&, int) { return {}; }

// ---- Backward scratch per entry ---------------------------------------------
// A GEMM or a LayerNorm writes the input gradient whether or not anyone reads
// it; when the input has no gradient tensor (the model input) it goes to a
// buffer that is thrown away. Elementwise kinds simply skip that write.

int64_t discarded_dx(const Model& m, int v, int64_t floats) {
  return m.has_grad_tensor(m.op(v).inputs.at(0)) ? 0 : floats;
}

ScratchFloats scratch_linear(const Model& m, int v) {
  const Op& in = m.op(m.op(v).inputs.at(0));
  return {0, discarded_dx(m, v, in.numel())};
}
ScratchFloats scratch_dense(const Model& m, int v) {
  const Op& op = m.op(v);
  const int64_t pre = op.act == Activation::None ? 0 : m.op(op.inputs.at(0)).rows() * op.cols();
  return {pre, scratch_linear(m, v)[kDiscardedDx]};
}
ScratchFloats scratch_layernorm(const Model& m, int v) { return {0, discarded_dx(m, v, m.op(v).numel())}; }
ScratchFloats scratch_conv(const Model& m, int v) {
  ScratchFloats s{};
  s[kConvColumns] = cpu::conv2d_scratch_floats(conv_geom(m, v));
  return s;
}
ScratchFloats scratch_batchnorm(const Model& m, int v) { return {0, discarded_dx(m, v, m.op(v).numel())}; }
ScratchFloats scratch_groupnorm(const Model& m, int v) { return scratch_batchnorm(m, v); }
// The columns of the convolution it is the gradient of, and, when the input
// gradient adds into another's, that convolution's output (dx) before it is added.
ScratchFloats scratch_conv_transpose(const Model& m, int v) {
  ScratchFloats s{};
  s[kConvColumns] = cpu::conv2d_scratch_floats(conv_transpose_geom(m, v));
  s[kDiscardedDx] = m.op(m.op(v).inputs.at(0)).numel();
  return s;
}
ScratchFloats scratch_matmul(const Model& m, int v) {
  const MatmulDims d = matmul_dims(m, v);
  ScratchFloats s{};
  // The operand gathered as it is, unexpanded.
  if (d.scratch_a) s[kMatmulA] = m.op(m.op(v).inputs[0]).numel();
  if (d.scratch_b) s[kMatmulB] = m.op(m.op(v).inputs[1]).numel();
  return s;
}
ScratchFloats scratch_attention(const Model& m, int v) {
  ScratchFloats s{};
  s[kAttention] = sdpa_geom(m, v).scratch_floats();
  return s;
}
ScratchFloats scratch_concat(const Model& m, int v) {
  ScratchFloats s{};
  if (m.op(v).attrs->const_at >= 0) {
    int64_t n = 1;
    for (const int64_t d : concat_piece_map(m, v).shape) n *= d;
    s[kConcatPiece] = n;
  }
  return s;
}
ScratchFloats scratch_none(const Model&, int) { return {}; }
ScratchFloats scratch_activation(const Model&, int) { return {}; }
ScratchFloats scratch_add(const Model&, int) { return {}; }
ScratchFloats scratch_dropout(const Model&, int) { return {}; }
ScratchFloats scratch_mse(const Model&, int) { return {}; }
ScratchFloats scratch_softmax_ce(const Model&, int) { return {}; }

#define REMAT_NO_PARAMS_NO_SCRATCH(entry) \
  constexpr auto params_##entry = &params_none; \
  constexpr auto scratch_##entry = &scratch_none;
REMAT_NO_PARAMS_NO_SCRATCH(maxpool)
REMAT_NO_PARAMS_NO_SCRATCH(avgpool)
REMAT_NO_PARAMS_NO_SCRATCH(global_avgpool)
REMAT_NO_PARAMS_NO_SCRATCH(softmax)
REMAT_NO_PARAMS_NO_SCRATCH(reshape)
REMAT_NO_PARAMS_NO_SCRATCH(view)
REMAT_NO_PARAMS_NO_SCRATCH(masked_fill)
REMAT_NO_PARAMS_NO_SCRATCH(reduce)
REMAT_NO_PARAMS_NO_SCRATCH(upsample)
REMAT_NO_PARAMS_NO_SCRATCH(bce_logits)
REMAT_NO_PARAMS_NO_SCRATCH(topk)
REMAT_NO_PARAMS_NO_SCRATCH(gather)
REMAT_NO_PARAMS_NO_SCRATCH(pad)
REMAT_NO_PARAMS_NO_SCRATCH(cumsum)
constexpr auto params_matmul = &params_none;
constexpr auto params_attention = &params_none;
constexpr auto scratch_by_const = &scratch_none;
constexpr auto scratch_embedding = &scratch_none;
constexpr auto scratch_pointwise = &scratch_none;
#undef REMAT_NO_PARAMS_NO_SCRATCH

struct ExecKind {
  OpKind kind;
  std::vector<ParamSpec> (*params)(const Model&, int);
  ScratchFloats (*scratch)(const Model&, int);
};

#define REMAT_EXEC_KIND_ROW(Kind, entry, ...) ExecKind{OpKind::Kind, params_##entry, scratch_##entry},
constexpr ExecKind kExecKinds[] = {REMAT_EXEC_KINDS(REMAT_EXEC_KIND_ROW)};
#undef REMAT_EXEC_KIND_ROW

const ExecKind* find(OpKind kind) {
  for (const auto& k : kExecKinds)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace

ParamSlots::ParamSlots(const Model& model) : first_(static_cast<std::size_t>(model.size()), -1) {
  int k = 0;
  for (int v = 0; v < model.size(); ++v) {
    const auto count = static_cast<int>(op_params(model, v).size());
    if (count) first_[static_cast<std::size_t>(v)] = k;
    k += count;
  }
}

bool exec_kind_listed(OpKind kind) { return find(kind) != nullptr; }

std::vector<ParamSpec> op_params(const Model& model, int v) {
  const ExecKind* k = find(model.op(v).kind);
  return k ? k->params(model, v) : std::vector<ParamSpec>{};
}

ScratchFloats op_scratch(const Model& model, int v) {
  const ExecKind* k = find(model.op(v).kind);
  ScratchFloats s = k ? k->scratch(model, v) : ScratchFloats{};
  if (k && dense_copy(model, v) == DenseCopy::Scratch) s[kDenseInput] = model.op(model.op(v).inputs[0]).numel();
  return s;
}

ScratchFloats model_scratch(const Model& model) {
  ScratchFloats most{};
  for (int v = 1; v < model.size(); ++v) {
    const ScratchFloats s = op_scratch(model, v);
    for (int i = 0; i < kScratchSlots; ++i) most[i] = std::max(most[i], s[i]);
  }
  return most;
}

cpu::Act kernel_act(OpKind kind) {
  switch (kind) {
    case OpKind::ReLU: return cpu::Act::ReLU;
    case OpKind::Tanh: return cpu::Act::Tanh;
    case OpKind::GELU: return cpu::Act::GELU;
    case OpKind::Sigmoid: return cpu::Act::Sigmoid;
    case OpKind::SiLU: return cpu::Act::SiLU;
    default: break;
  }
  throw InternalError("kernel_act: " + std::string(kind_name(kind)) + " is not an activation");
}

cpu::Act kernel_act(Activation a) {
  switch (a) {
    case Activation::ReLU: return cpu::Act::ReLU;
    case Activation::Tanh: return cpu::Act::Tanh;
    case Activation::None: break;
  }
  return cpu::Act::None;
}

namespace {

// Begin and end pads of spatial dimension i (ONNX order: all begins, then all ends).
std::pair<int64_t, int64_t> pads_of(const OpAttrs& a, std::size_t i) {
  const std::size_t sp = a.kernel.size();
  return {a.pads.at(i), a.pads.at(sp + i)};
}

}  // namespace

namespace {

// The convolution over `image` (N, C, [H,] W) with `k` output channels, as
// `a` describes it (1-D: H = 1, one kernel row).
cpu::ConvGeom geom_over(const OpAttrs& a, const Shape& image, int64_t k) {
  const bool two_d = a.kernel.size() == 2;
  cpu::ConvGeom g;
  g.n = image.at(0);
  g.c = image.at(1);
  g.h = two_d ? image.at(2) : 1;
  g.w = image.back();
  g.k = k;
  g.r = two_d ? a.kernel[0] : 1;
  g.s = a.kernel.back();
  g.stride_h = two_d ? a.stride[0] : 1;
  g.stride_w = a.stride.back();
  g.pad_h = two_d ? a.pads[0] : 0;
  g.pad_w = pads_of(a, a.kernel.size() - 1).first;
  g.dil_h = two_d ? a.dilation[0] : 1;
  g.dil_w = a.dilation.back();
  g.groups = a.groups;
  return g;
}

}  // namespace

cpu::ConvGeom conv_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  if (const std::string why = kernel_attr_problem(op); !why.empty())
    throw InputError(op_label(m, v) + ": the kernels cannot run a Conv with " + why);
  return geom_over(*op.attrs, m.op(op.inputs.at(0)).shape, op.attrs->channels);
}

// A ConvTranspose is the gradient of the convolution from its output (the
// image) to its input (x, whose channels are the convolution's k).
cpu::ConvGeom conv_transpose_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  if (const std::string why = kernel_attr_problem(op); !why.empty())
    throw InputError(op_label(m, v) + ": the kernels cannot run a ConvTranspose with " + why);
  return geom_over(*op.attrs, op.shape, m.op(op.inputs.at(0)).shape.at(1));
}

UpsampleDims upsample_dims(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  const bool two_d = op.shape.size() == 4;
  UpsampleDims d;
  d.planes = op.shape.at(0) * op.shape.at(1);
  d.ih = two_d ? x.shape.at(2) : 1;
  d.iw = x.shape.back();
  d.oh = two_d ? op.shape.at(2) : 1;
  d.ow = op.shape.back();
  return d;
}

cpu::SdpaGeom sdpa_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op &q = m.op(op.inputs.at(0)), &k = m.op(op.inputs.at(1)), &val = m.op(op.inputs.at(2));
  const bool heads = q.shape.size() == 4;  // else (batch, rows, cols): one head each
  // (batch, head, row, col) strides of an input, its head stride 0 at rank 3.
  auto strides4 = [heads](const Op& x) {
    const std::vector<int64_t> s = layout_of(x);
    return heads ? std::array<int64_t, 4>{s[0], s[1], s[2], s[3]} : std::array<int64_t, 4>{s[0], 0, s[1], s[2]};
  };
  cpu::SdpaGeom g;
  g.batch = q.shape[0];
  g.heads = heads ? q.shape[1] : 1;
  g.tq = q.shape[q.shape.size() - 2];
  g.tk = k.shape[k.shape.size() - 2];
  g.d = q.shape.back();
  g.dv = val.shape.back();
  g.causal = op.attrs->causal;
  g.scale = op.attrs->scale > 0 ? op.attrs->scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.d)));
  g.q_strides = strides4(q);
  g.k_strides = strides4(k);
  g.v_strides = strides4(val);
  g.out_strides = strides4(op);
  // The mask's strides over (batch, head, row, col), right-aligned onto the
  // scores (batch, heads, tq, tk) or (batch, tq, tk); 0 where it broadcasts.
  const std::vector<int64_t>& ms = op.attrs->const_shape;
  if (!ms.empty()) {
    const std::vector<int64_t> cs = contiguous_strides(ms);
    const std::size_t rank = heads ? 4 : 3;
    std::array<int64_t, 4> st{};
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const std::size_t at = rank - ms.size() + i;  // its dimension among the scores'
      const std::size_t dim = heads ? at : (at == 0 ? 0 : at + 1);
      st[dim] = ms[i] == 1 ? 0 : cs[i];
    }
    g.mask_strides = st;
  }
  return g;
}

cpu::PoolGeom pool_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  if (const std::string why = kernel_attr_problem(op); !why.empty())
    throw InputError(op_label(m, v) + ": the kernels cannot run a " + std::string(kind_name(op.kind)) + " with " + why);
  const OpAttrs& a = *op.attrs;
  const bool two_d = x.shape.size() == 4;
  cpu::PoolGeom g;
  g.n = x.shape.at(0);
  g.c = x.shape.at(1);
  g.h = two_d ? x.shape.at(2) : 1;
  g.w = x.shape.back();
  if (!a.output_size.empty()) {  // adaptive average pooling
    g.out_h = two_d ? a.output_size[0] : 1;
    g.out_w = a.output_size.back();
    return g;
  }
  g.ceil_mode = a.ceil_mode;
  g.count_include_pad = a.count_include_pad;
  if (op.kind == OpKind::MaxPool) {
    g.dil_h = two_d ? a.dilation[0] : 1;
    g.dil_w = a.dilation.back();
  }
  g.kh = two_d ? a.kernel[0] : 1;
  g.kw = a.kernel.back();
  g.stride_h = two_d ? a.stride[0] : 1;
  g.stride_w = a.stride.back();
  g.pad_h = two_d ? a.pads[0] : 0;
  g.pad_w = pads_of(a, a.kernel.size() - 1).first;
  return g;
}

NCS ncs_of(const Op& op) {
  const int64_t n = op.shape.at(0), c = op.shape.at(1);
  return {n, c, op.numel() / (n * c)};
}

ConcatDims concat_dims(const Model& m, int v) {
  const Op& op = m.op(v);
  const auto rank = static_cast<int64_t>(op.shape.size());
  const auto ax = static_cast<std::size_t>(op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis);
  ConcatDims d;
  for (std::size_t i = 0; i < op.shape.size(); ++i) {
    if (i < ax) d.outer *= op.shape[i];
    if (i > ax) d.inner *= op.shape[i];
  }
  for (const int u : op.inputs) d.widths.push_back(m.op(u).shape.at(ax));
  if (op.attrs->const_at >= 0) {
    d.piece = op.attrs->const_at;
    d.widths.insert(d.widths.begin() + d.piece, op.attrs->const_shape.at(ax));
  }
  return d;
}

ViewMap concat_piece_map(const Model& m, int v) {
  const Op& op = m.op(v);
  const auto rank = static_cast<int64_t>(op.shape.size());
  const auto ax = static_cast<std::size_t>(op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis);
  const std::vector<int64_t>& c = op.attrs->const_shape;
  ViewMap out;
  out.shape.assign(op.shape.begin(), op.shape.end());
  out.shape[ax] = c.at(ax);
  out.stride.assign(c.size(), 0);
  int64_t st = 1;
  for (std::size_t k = c.size(); k-- > 0;) {
    out.stride[k] = c[k] == 1 ? 0 : st;  // a broadcast dimension repeats the same elements
    st *= c[k];
  }
  return out;
}

namespace {

bool contiguous(const Op& x) { return !x.view || is_contiguous(x.shape, *x.strides); }

// Per product of the batch (row-major over `batch`): the matrix of x it reads,
// x's batch dimensions right-aligned to it, a size-1 or missing one repeating.
std::vector<int64_t> operand_index(const Op& x, const std::vector<int64_t>& batch) {
  const std::size_t rx = x.shape.size() - 2, lead = batch.size() - rx;
  std::vector<int64_t> step(batch.size(), 0);  // x's matrix stride along each batch dimension
  int64_t s = 1;
  for (std::size_t j = rx; j-- > 0;) {
    step[lead + j] = x.shape[j] == 1 ? 0 : s;
    s *= x.shape[j];
  }
  int64_t total = 1;
  for (const int64_t d : batch) total *= d;
  std::vector<int64_t> out(static_cast<std::size_t>(total));
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t at = 0;
  for (int64_t i = 0; i < total; ++i) {
    out[static_cast<std::size_t>(i)] = at;
    for (std::size_t j = batch.size(); j-- > 0;) {  // odometer, last dimension fastest
      at += step[j];
      if (++idx[j] < batch[j]) break;
      at -= step[j] * batch[j];
      idx[j] = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> iota_index(int64_t n) {
  std::vector<int64_t> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i;
  return out;
}

MatmulDims matmul_dims(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& a = m.op(op.inputs.at(0));
  const Op& b = m.op(op.inputs.at(1));
  MatmulDims d;
  d.m = a.shape.at(a.shape.size() - 2);
  d.k = a.shape.back();
  d.n = b.shape.back();
  const std::vector<int64_t> batch(op.shape.begin(), op.shape.end() - 2);
  d.a_of = operand_index(a, batch);
  d.b_of = operand_index(b, batch);
  d.batch = static_cast<int64_t>(d.a_of.size());
  const MatmulCopies copies = matmul_copies(a, b, batch);  // the rule's decision (op_rules)
  d.aux_a = copies.a;
  d.aux_b = copies.b;
  d.scratch_a = !d.aux_a && !contiguous(a);
  d.scratch_b = !d.aux_b && !contiguous(b);
  return d;
}

ViewMap coalesced(const ViewMap& m) {
  ViewMap out;
  out.base = m.base;
  for (std::size_t d = 0; d < m.shape.size(); ++d) {
    if (m.shape[d] == 1) continue;
    if (!out.shape.empty() && out.stride.back() == m.stride[d] * m.shape[d]) {
      out.shape.back() *= m.shape[d];
      out.stride.back() = m.stride[d];
    } else {
      out.shape.push_back(m.shape[d]);
      out.stride.push_back(m.stride[d]);
    }
  }
  return out;
}

ViewMap matmul_expanded(const Model& m, int v, std::size_t k) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(k));
  ViewMap out;
  out.shape.assign(op.shape.begin(), op.shape.end() - 2);
  out.shape.push_back(x.shape.at(x.shape.size() - 2));
  out.shape.push_back(x.shape.back());
  const std::vector<int64_t> st = layout_of(x);
  const std::size_t lead = out.shape.size() - x.shape.size();
  out.stride.assign(out.shape.size(), 0);  // a broadcast dimension reads the same elements again
  for (std::size_t i = 0; i < x.shape.size(); ++i)
    if (x.shape[i] == out.shape[lead + i]) out.stride[lead + i] = st[i];
  return out;
}

std::vector<int64_t> MatmulDims::a_read() const { return aux_a ? iota_index(batch) : a_of; }
std::vector<int64_t> MatmulDims::b_read() const { return aux_b ? iota_index(batch) : b_of; }

std::vector<GemmRun> gemm_runs(std::span<const int64_t> x, std::span<const int64_t> y, std::span<const int64_t> z,
                               bool accumulate) {
  const std::size_t n = z.size();
  if (x.size() != n || y.size() != n) throw InternalError("gemm_runs: index lists of different lengths");
  // Round r holds each z's r-th product, in increasing i: its z are distinct,
  // so one strided batch may write them together.
  std::vector<std::size_t> writes(n == 0 ? 0 : static_cast<std::size_t>(*std::max_element(z.begin(), z.end())) + 1, 0);
  std::vector<std::vector<std::size_t>> rounds;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = writes[static_cast<std::size_t>(z[i])]++;
    if (r == rounds.size()) rounds.emplace_back();
    rounds[r].push_back(i);
  }
  std::vector<GemmRun> runs;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const std::vector<std::size_t>& p = rounds[r];
    for (std::size_t k = 0; k < p.size();) {
      const std::size_t i = p[k];
      GemmRun run{1, x[i], 0, y[i], 0, z[i], 0, accumulate || r > 0};
      std::size_t j = k + 1;
      if (j < p.size()) {
        run.sx = x[p[j]] - x[i];
        run.sy = y[p[j]] - y[i];
        run.sz = z[p[j]] - z[i];
        while (j < p.size() && x[p[j]] - x[p[j - 1]] == run.sx && y[p[j]] - y[p[j - 1]] == run.sy &&
               z[p[j]] - z[p[j - 1]] == run.sz)
          ++j;
        run.count = static_cast<int64_t>(j - k);
      }
      runs.push_back(run);
      k = j;
    }
  }
  return runs;
}

cpu::ConstOp const_op(OpKind kind) {
  switch (kind) {
    case OpKind::MulConst: return cpu::ConstOp::Mul;
    case OpKind::DivConst: return cpu::ConstOp::Div;
    case OpKind::AddConst: return cpu::ConstOp::Add;
    default: break;
  }
  throw InternalError("const_op: " + std::string(kind_name(kind)) + " is not by a constant");
}

bool reads_strided(const Model& m, int v) {
  for (const int u : m.op(v).inputs) {
    const Op& x = m.op(u);  // a view, or an owner laid out in another order (an Attention's output)
    if (!is_contiguous(std::vector<int64_t>(x.shape.begin(), x.shape.end()), layout_of(x))) return true;
  }
  return false;
}

cpu::PwGeom pointwise_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const PwOperands ops = pointwise_operands(op);
  if (!ops.problem.empty()) throw InputError(op_label(m, v) + ": " + ops.problem);
  cpu::PwGeom g;
  g.rank = static_cast<int>(op.shape.size());
  if (g.rank > cpu::PwGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  for (int d = 0; d < g.rank; ++d) g.shape[d] = op.shape[static_cast<std::size_t>(d)];
  g.arity = ops.arity;
  g.fn = static_cast<pw::Fn>(op.attrs->fn);
  g.p = op.attrs->alpha;
  g.q = op.attrs->beta;
  for (int k = 0; k < ops.arity; ++k) {
    std::vector<int64_t> shape, strides;
    if (ops.at[k].src == PwOperand::Input) {
      const Op& x = m.op(op.inputs[static_cast<std::size_t>(ops.at[k].input)]);
      shape.assign(x.shape.begin(), x.shape.end());
      strides = layout_of(x);
    } else if (ops.at[k].src == PwOperand::Constant) {
      shape = op.attrs->const_shape;
      strides = contiguous_strides(shape);
    }
    // Right-aligned onto the output; where the operand has 1, it repeats.
    const int lead = g.rank - static_cast<int>(shape.size());
    if (lead < 0) throw InputError(op_label(m, v) + ": an operand of higher rank than the result");
    for (int d = 0; d < g.rank; ++d) {
      const int64_t n = d < lead ? 1 : shape[static_cast<std::size_t>(d - lead)];
      g.dims[k][d] = n;
      g.stride[k][d] = n == 1 ? 0 : strides[static_cast<std::size_t>(d - lead)];
    }
  }
  return g;
}

cpu::PwGeom concat_piece_geom(const Model& m, int v, std::size_t k, int64_t& out_offset) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(k));
  const ConcatDims d = concat_dims(m, v);
  // Widths list the constant piece at its place among the inputs.
  const std::size_t at = k + (d.piece >= 0 && static_cast<int64_t>(k) >= d.piece ? 1 : 0);
  int64_t before = 0;
  for (std::size_t i = 0; i < at; ++i) before += d.widths[i];
  out_offset = before * d.inner;
  cpu::PwGeom g;
  g.rank = static_cast<int>(x.shape.size());
  if (g.rank > cpu::PwGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  g.fn = pw::Fn::Cast;
  g.arity = 1;
  g.out_strided = true;
  const std::vector<int64_t> xs = layout_of(x);
  const std::vector<int64_t> ys = contiguous_strides(std::vector<int64_t>(op.shape.begin(), op.shape.end()));
  for (int i = 0; i < g.rank; ++i) {
    g.shape[i] = g.dims[0][i] = x.shape[static_cast<std::size_t>(i)];
    g.stride[0][i] = xs[static_cast<std::size_t>(i)];
    g.out_stride[i] = ys[static_cast<std::size_t>(i)];
  }
  return g;
}

DenseCopy dense_copy(const Model& m, int v) {
  const Op& op = m.op(v);
  if (op.inputs.size() != 1) return DenseCopy::None;
  switch (op.kind) {
    case OpKind::Linear:
    case OpKind::LayerNorm:
    case OpKind::Softmax:
    case OpKind::Dropout:
    case OpKind::ReLU:
    case OpKind::Tanh:
    case OpKind::GELU:
    case OpKind::Sigmoid:
    case OpKind::SiLU:
    case OpKind::MulConst:
    case OpKind::DivConst:
    case OpKind::AddConst:
    case OpKind::MaskedFill:
    // PyTorch's convolutions, norms of channels, pools, upsampling and padding make
    // their input contiguous first (a transient copy) where it is not.
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::BatchNorm:
    case OpKind::GroupNorm:
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::GlobalAvgPool:
    case OpKind::Upsample:
    case OpKind::Pad:
    // The losses read their input through strides in PyTorch (no copy); the
    // kernels read rows, so a transient copy in scratch, which holds no
    // tracked byte, keeps the counts PyTorch's.
    case OpKind::MSELoss:
    case OpKind::BCEWithLogitsLoss:
    case OpKind::SoftmaxCELoss:
    // PyTorch's cumsum reads strides and writes a contiguous result; its
    // kernel here walks dense lines.
    case OpKind::Cumsum: break;
    default: return DenseCopy::None;
  }
  const Op& x = m.op(op.inputs[0]);
  if (is_contiguous(std::vector<int64_t>(x.shape.begin(), x.shape.end()), layout_of(x))) return DenseCopy::None;
  if (op.kind == OpKind::Linear && op.aux_bytes > 0)
    return op.aux_bytes == 4 * static_cast<uint64_t>(x.numel()) ? DenseCopy::Aux : DenseCopy::None;
  return DenseCopy::Scratch;
}

cpu::PwGeom dense_copy_geom(const Model& m, int u) {
  const Op& x = m.op(u);
  cpu::PwGeom g;
  g.rank = static_cast<int>(x.shape.size());
  if (g.rank > cpu::PwGeom::kMaxRank) throw InputError(op_label(m, u) + ": rank over 8");
  g.fn = pw::Fn::Cast;
  g.arity = 1;
  const std::vector<int64_t> xs = layout_of(x);
  for (int i = 0; i < g.rank; ++i) {
    g.shape[i] = g.dims[0][i] = x.shape[static_cast<std::size_t>(i)];
    g.stride[0][i] = g.shape[i] == 1 ? 0 : xs[static_cast<std::size_t>(i)];
  }
  return g;
}

cpu::PwGeom strided_add_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  cpu::PwGeom g;
  g.rank = static_cast<int>(op.shape.size());
  if (g.rank > cpu::PwGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  g.fn = pw::Fn::Add;
  g.arity = 2;
  for (int k = 0; k < 2; ++k) {
    const Op& x = m.op(op.inputs.at(static_cast<std::size_t>(k)));  // the output's shape (rule_add)
    const std::vector<int64_t> xs = layout_of(x);
    for (int i = 0; i < g.rank; ++i) {
      g.shape[i] = g.dims[k][i] = x.shape[static_cast<std::size_t>(i)];
      g.stride[k][i] = g.shape[i] == 1 ? 0 : xs[static_cast<std::size_t>(i)];
    }
  }
  return g;
}

bool dense_copy_in_backward(const Model& m, int v) {
  const Op& op = m.op(v);
  const DenseCopy d = dense_copy(m, v);
  if (d == DenseCopy::Aux) return true;
  return d == DenseCopy::Scratch && std::find(op.saved.begin(), op.saved.end(), op.inputs[0]) != op.saved.end();
}

cpu::PwGeom concat_const_geom(const Model& m, int v, int64_t& out_offset) {
  const Op& op = m.op(v);
  const ConcatDims d = concat_dims(m, v);
  int64_t before = 0;
  for (int64_t i = 0; i < d.piece; ++i) before += d.widths[static_cast<std::size_t>(i)];
  out_offset = before * d.inner;
  const ViewMap piece = concat_piece_map(m, v);  // the piece's shape as it lies in the output
  cpu::PwGeom g;
  g.rank = static_cast<int>(piece.shape.size());
  if (g.rank > cpu::PwGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  g.fn = pw::Fn::Cast;
  g.arity = 1;
  g.out_strided = true;
  const std::vector<int64_t> xs = contiguous_strides(piece.shape);
  const std::vector<int64_t> ys = contiguous_strides(std::vector<int64_t>(op.shape.begin(), op.shape.end()));
  for (int i = 0; i < g.rank; ++i) {
    g.shape[i] = g.dims[0][i] = piece.shape[static_cast<std::size_t>(i)];
    g.stride[0][i] = g.shape[i] == 1 ? 0 : xs[static_cast<std::size_t>(i)];
    g.out_stride[i] = ys[static_cast<std::size_t>(i)];
  }
  return g;
}

cpu::ReduceGeom reduce_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  cpu::ReduceGeom g;
  g.rank = static_cast<int>(x.shape.size());
  if (g.rank > cpu::ReduceGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  const std::vector<int64_t> st = layout_of(x);
  for (int d = 0; d < g.rank; ++d) {
    g.shape[d] = x.shape[static_cast<std::size_t>(d)];
    g.stride[d] = st[static_cast<std::size_t>(d)];
    g.reduced[d] = std::find(op.attrs->axes.begin(), op.attrs->axes.end(), d) != op.attrs->axes.end();
  }
  g.fn = static_cast<pw::ReduceFn>(op.attrs->fn);
  return g;
}

cpu::TopKGeom topk_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  cpu::TopKGeom g;
  g.rank = static_cast<int>(x.shape.size());
  if (g.rank > cpu::TopKGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  const std::vector<int64_t> st = layout_of(x);
  for (int d = 0; d < g.rank; ++d) {
    g.shape[d] = x.shape[static_cast<std::size_t>(d)];
    g.stride[d] = st[static_cast<std::size_t>(d)];
  }
  g.axis = static_cast<int>(op.attrs->axis < 0 ? op.attrs->axis + g.rank : op.attrs->axis);
  g.k = op.attrs->k;
  return g;
}

cpu::ScanGeom cumsum_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const auto rank = static_cast<int64_t>(op.shape.size());
  const int64_t axis = op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis;
  cpu::ScanGeom g;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = op.shape[static_cast<std::size_t>(d)];
    if (d < axis) g.outer *= n;
    else if (d == axis) g.len = n;
    else g.inner *= n;
  }
  return g;
}

cpu::GatherGeom gather_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  const Op& index = m.op(op.inputs.at(1));
  cpu::GatherGeom g;
  g.rank = static_cast<int>(x.shape.size());
  if (g.rank > cpu::GatherGeom::kMaxRank) throw InputError(op_label(m, v) + ": rank over 8");
  const std::vector<int64_t> xs = layout_of(x), is = layout_of(index);
  for (int d = 0; d < g.rank; ++d) {
    const auto k = static_cast<std::size_t>(d);
    g.shape[d] = index.shape[k];
    g.i_stride[d] = is[k];
    g.x_shape[d] = x.shape[k];
    g.x_stride[d] = xs[k];
  }
  g.axis = static_cast<int>(op.attrs->axis < 0 ? op.attrs->axis + g.rank : op.attrs->axis);
  return g;
}

int64_t constant_numel(const Op& op) {
  int64_t n = 1;
  for (const int64_t d : op.attrs->const_shape) n *= d;
  return n;
}

std::vector<uint8_t> constant_bytes(const Op& op) {
  const ConstValues& c = op.attrs->values;
  if (op.kind == OpKind::Pointwise) {
    // The fixed constant's values, then the scalar operand (if it has one).
    std::vector<float> f;
    if (op.attrs->const_at >= 0 && !op.attrs->learned) f.assign(c.data(), c.data() + c.size());
    const PwOperands ops = pointwise_operands(op);
    if (ops.problem.empty() && ops.at[ops.arity - 1].src == PwOperand::Scalar) f.push_back(op.attrs->scalar);
    std::vector<uint8_t> out(f.size() * sizeof(float));
    if (!f.empty()) std::memcpy(out.data(), f.data(), out.size());
    return out;
  }
  if (op.kind == OpKind::Attention) {  // the additive mask, as given
    std::vector<uint8_t> out(c.size() * sizeof(float));
    if (!c.empty()) std::memcpy(out.data(), c.data(), out.size());
    return out;
  }
  if (op.kind == OpKind::MaskedFill) {
    std::vector<uint8_t> mask(c.size());
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = c.data()[i] != 0.0f ? 1 : 0;
    return mask;
  }
  const bool fixed = op.kind == OpKind::MulConst || op.kind == OpKind::DivConst ||
                     (op.kind == OpKind::AddConst && !op.attrs->learned);
  if (!fixed || c.empty()) return {};
  std::vector<uint8_t> out(c.size() * sizeof(float));
  std::memcpy(out.data(), c.data(), out.size());
  return out;
}

ViewMap view_map(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  const std::vector<int64_t> cs = contiguous_strides(x.shape);
  ViewMap out;
  out.shape = op.shape;
  switch (op.kind) {
    case OpKind::Transpose:
      for (const int64_t p : op.attrs->perm) out.stride.push_back(cs.at(static_cast<std::size_t>(p)));
      break;
    case OpKind::Slice: {
      const auto rank = static_cast<int64_t>(x.shape.size());
      const auto ax = static_cast<std::size_t>(op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis);
      const int64_t dim = x.shape[ax];
      const int64_t start = std::clamp(op.attrs->start < 0 ? op.attrs->start + dim : op.attrs->start, int64_t{0}, dim);
      out.stride = cs;
      out.stride[ax] *= op.attrs->step;
      out.base = start * cs[ax];
      break;
    }
    case OpKind::Expand: {
      const std::size_t lead = op.shape.size() - x.shape.size();
      out.stride.assign(op.shape.size(), 0);
      for (std::size_t i = 0; i < x.shape.size(); ++i)
        out.stride[lead + i] = x.shape[i] == op.shape[lead + i] ? cs[i] : 0;
      break;
    }
    default:  // Reshape: the same elements in the same order
      out.stride = contiguous_strides(op.shape);
      break;
  }
  return out;
}

int64_t storage_offset(const Model& m, int v) {
  const Op& op = m.op(v);
  if (!op.view) return 0;
  const int u = op.inputs.at(0);
  int64_t off = storage_offset(m, u);
  if (op.kind == OpKind::Slice) {
    // The slice's first element, in the input's storage strides.
    const Op& x = m.op(u);
    const std::vector<int64_t> st = layout_of(x);
    const auto rank = static_cast<int64_t>(x.shape.size());
    const auto ax = static_cast<std::size_t>(op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis);
    const int64_t dim = x.shape[ax];
    off += std::clamp(op.attrs->start < 0 ? op.attrs->start + dim : op.attrs->start, int64_t{0}, dim) * st[ax];
  }
  return off;
}

std::string op_label(const Model& m, int v) {
  const Op& op = m.op(v);
  return "op " + std::to_string(v) + (op.name.empty() ? "" : " ('" + op.name + "')");
}

const float* OpCall::need(int u) const {
  const void* p = t_.act[static_cast<std::size_t>(u)];
  if (!p)
    throw InputError(op_label(model, v) + ": " + std::string(kind_name(op.kind)) + " needs A(" + std::to_string(u) +
                     ") which is not resident (is it missing from the op's saved set?)");
  return static_cast<const float*>(p);
}

float* OpCall::aux() const {
  void* p = static_cast<std::size_t>(v) < t_.aux.size() ? t_.aux[static_cast<std::size_t>(v)] : nullptr;
  if (!p)
    throw InternalError(op_label(model, v) + ": " + std::string(kind_name(op.kind)) +
                        " reads aux(" + std::to_string(v) + ") which is not resident");
  return static_cast<float*>(p);
}

}  // namespace remat
