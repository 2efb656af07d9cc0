#include "core/model/op_rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "core/base/errors.h"
#include "core/kernels/pad_geom.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/autocast.h"
#include "core/model/grad_flow.h"
#include "core/model/op_layout.h"

namespace remat {

std::string shape_string(std::span<const int64_t> s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

namespace {

// What a rule works on and what it fills in.
struct Derivation {
  Derivation(Op& o, std::span<const Op> b, std::string_view w, int s) : op(o), before(b), where(w), self(s) {}
  Op& op;
  std::span<const Op> before;  // the ops added so far: op ids index it
  std::string_view where;
  int self;
  double fwd = 0, bwd = 0;
  OpIds saved;  // in place: no allocation per op
  uint64_t params = 0;
  uint64_t aux = 0;
  bool view = false;
  std::vector<int64_t> strides;  // a view's layout; an owner's when not row-major (Attention)

  const Op& in(std::size_t i) const { return before[static_cast<std::size_t>(op.inputs.at(i))]; }
  double n() const { return static_cast<double>(op.numel()); }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(where_label(where, self) + ": " + what); }
  std::string kind() const { return std::string(kind_name(op.kind)); }

  // Views and the reshuffling kinds (Concat) keep their input's element type.
  void keep_input_dtype() { op.dtype = in(0).dtype; }
  // Kinds that keep their input's shape; a given shape must agree.
  void same_shape() {
    if (op.shape.empty()) op.shape = in(0).shape;
    if (op.shape != in(0).shape)
      fail("shape " + shape_string(op.shape) + " does not match input shape " + shape_string(in(0).shape));
  }
  void need_rank(const Op& x, std::size_t lo, std::size_t hi) const {
    if (x.shape.size() < lo || x.shape.size() > hi)
      fail(kind() + " needs an input of rank " + std::to_string(lo) + (hi > lo ? " to " + std::to_string(hi) : "") +
           ", got " + shape_string(x.shape));
  }
  // The output shape the caller had to give, checked against what was inferred.
  void set_shape(std::vector<int64_t> inferred) {
    if (!op.shape.empty() && op.shape != inferred)
      fail("shape " + shape_string(op.shape) + " does not match the inferred " + shape_string(inferred));
    op.shape = std::move(inferred);
  }
  uint64_t elem() const { return dtype_size(op.dtype); }
  // Normalisation statistics are kept in f32 whatever the activations' dtype
  // (PyTorch's accumulation type on the GPU).
  static constexpr uint64_t kStatBytes = 4;
  // An axis attribute, negative counting from the end, checked against `rank`.
  std::size_t axis(int64_t a, std::size_t rank) const {
    const int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    return static_cast<std::size_t>(a < 0 ? a + r : a);
  }
  // Inputs a matmul multiplies as (batch, rows, k) or (rows, k): saved as they
  // are when that reshape is a view of them, else PyTorch saves a contiguous
  // copy, which is private to this op (aux).
  void save_for_matmul(int input, const std::vector<int64_t>& expanded, const std::vector<int64_t>& folded) {
    save_or_copy(input, !folds_broadcast(before[static_cast<std::size_t>(input)], expanded, folded), folded);
  }
  void save_or_copy(int input, bool copy, const std::vector<int64_t>& folded) {
    if (!copy) {
      if (std::find(saved.begin(), saved.end(), input) == saved.end()) saved.push_back(input);
    } else {
      // Autocast's cast of the input is that copy, in the cast's dtype.
      aux += tensor_bytes(folded, autocast_cast(op).value_or(before[static_cast<std::size_t>(input)].dtype));
      fwd += static_cast<double>(tensor_bytes(folded, DType::I32) / 4);  // the copy
    }
  }
};

// Broadcasting a constant of `c` onto `shape` must not enlarge it.
void check_broadcast_onto(const Derivation& d, const std::vector<int64_t>& c, const std::vector<int64_t>& shape) {
  if (c.size() > shape.size()) d.fail("constant of shape " + shape_string(c) + " has a higher rank than the input " + shape_string(shape));
  for (std::size_t i = 0; i < c.size(); ++i) {
    const int64_t a = c[c.size() - 1 - i], b = shape[shape.size() - 1 - i];
    if (a != 1 && a != b) d.fail("constant of shape " + shape_string(c) + " does not broadcast onto " + shape_string(shape));
  }
}

// Spatial output size of a convolution or pooling window (PyTorch's rule,
// ceil_mode included: a last window must start inside the padded input).
int64_t window_out(const Derivation& d, int64_t in, int64_t k, int64_t stride, int64_t pb, int64_t pe, int64_t dil,
                   bool ceil_mode) {
  if (k <= 0 || stride <= 0 || dil <= 0 || pb < 0 || pe < 0)
    d.fail("kernel, stride and dilation must be positive and pads not negative");
  const int64_t span = in + pb + pe - dil * (k - 1) - 1;
  if (span < 0) d.fail("the window (kernel " + std::to_string(k) + ", dilation " + std::to_string(dil) + ") is larger than the padded input " + std::to_string(in + pb + pe));
  int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pb) --out;
  return out;
}

// Spatial attributes of a window op over an (N, C, spatial...) input, with
// defaults filled in; returns the output shape with `channels` channels.
std::vector<int64_t> window_shape(Derivation& d, int64_t channels, bool default_stride_is_kernel) {
  const Op& x = d.in(0);
  d.need_rank(x, 3, 4);
  OpAttrs& a = d.op.attrs.edit();  // the defaults filled in
  const std::size_t sp = x.shape.size() - 2;
  if (a.kernel.size() != sp)
    d.fail(d.kind() + " over a rank-" + std::to_string(x.shape.size()) + " input needs a kernel of " + std::to_string(sp) +
           " dimension(s), got " + shape_string(a.kernel));
  if (a.stride.empty()) a.stride = default_stride_is_kernel ? a.kernel : std::vector<int64_t>(sp, 1);
  if (a.pads.empty()) a.pads.assign(2 * sp, 0);
  if (a.dilation.empty()) a.dilation.assign(sp, 1);
  if (a.stride.size() != sp || a.pads.size() != 2 * sp || a.dilation.size() != sp)
    d.fail("stride and dilation need " + std::to_string(sp) + " values and pads " + std::to_string(2 * sp));
  std::vector<int64_t> out = {x.shape[0], channels};
  for (std::size_t i = 0; i < sp; ++i)
    out.push_back(window_out(d, x.shape[2 + i], a.kernel[i], a.stride[i], a.pads[i], a.pads[sp + i], a.dilation[i], a.ceil_mode));
  return out;
}

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= static_cast<double>(x);
  return p;
}

// ---- one rule per kind ------------------------------------------------------
// saved: what PyTorch's derivative formula for the op keeps (docs/model-format.md).

void rule_input(Derivation& d) {
  if (d.op.shape.empty()) d.fail("Input needs a shape");
}

void rule_linear(Derivation& d) {  // Linear and Dense
  const Op& x = d.in(0);
  if (x.shape.empty()) d.fail("input of a " + d.kind() + " must have rank >= 1");
  if (d.op.shape.size() != x.shape.size() || !std::equal(x.shape.begin(), x.shape.end() - 1, d.op.shape.begin()))
    d.fail("output shape " + shape_string(d.op.shape) + " must equal input shape " + shape_string(x.shape) +
           " except the last dimension");
  const double rows = static_cast<double>(x.rows()), fin = static_cast<double>(x.cols()), fout = static_cast<double>(d.op.cols());
  const bool bias = d.op.kind == OpKind::Dense || d.op.attrs->bias;
  d.params = tensor_bytes({x.cols(), d.op.cols()}, d.op.dtype) + (bias ? tensor_bytes({d.op.cols()}, d.op.dtype) : 0);
  d.fwd = 2 * rows * fin * fout;
  d.bwd = 4 * rows * fin * fout;
  // Rank > 2: torch's linear multiplies the input folded to (rows, in).
  if (x.shape.size() > 2) d.save_for_matmul(d.op.inputs[0], x.shape, {x.rows(), x.cols()});
  else d.saved = {d.op.inputs[0]};
  if (d.op.kind == OpKind::Dense) {
    d.fwd += rows * fout;
    d.bwd += rows * fout;
    d.saved.push_back(d.self);
  }
}

void rule_activation(Derivation& d) {
  d.same_shape();
  const double n = d.n();
  switch (d.op.kind) {
    case OpKind::ReLU: d.fwd = n, d.bwd = 2 * n, d.saved = {d.self}; break;       // from its output
    case OpKind::Tanh: d.fwd = n, d.bwd = 2 * n, d.saved = {d.self}; break;       // 1 - y^2
    case OpKind::Sigmoid: d.fwd = 4 * n, d.bwd = 3 * n, d.saved = {d.self}; break;  // y (1 - y)
    case OpKind::GELU: d.fwd = 8 * n, d.bwd = 12 * n, d.saved = {d.op.inputs[0]}; break;
    case OpKind::SiLU: d.fwd = 5 * n, d.bwd = 8 * n, d.saved = {d.op.inputs[0]}; break;
    default: break;
  }
}

void rule_layernorm(Derivation& d) {
  d.same_shape();
  d.fwd = 5 * d.n();
  d.bwd = 8 * d.n();
  d.params = d.op.attrs->affine ? 2 * tensor_bytes({d.op.cols()}, d.op.dtype) : 0;  // γ, β
  d.saved = {d.op.inputs[0]};
  d.aux = 2 * Derivation::kStatBytes * static_cast<uint64_t>(d.op.rows());  // mean and rstd per row
}

uint64_t batchnorm_buffer_bytes(int64_t channels) { return 2 * Derivation::kStatBytes * static_cast<uint64_t>(channels); }

void rule_batchnorm(Derivation& d) {
  d.need_rank(d.in(0), 2, 8);
  d.same_shape();
  const int64_t c = d.op.shape[1];
  d.fwd = 5 * d.n();
  d.bwd = 8 * d.n();
  d.params = (d.op.attrs->affine ? 2 * tensor_bytes({c}, d.op.dtype) : 0) + batchnorm_buffer_bytes(c);  // γ, β + running stats
  d.saved = {d.op.inputs[0]};
  d.aux = 2 * Derivation::kStatBytes * static_cast<uint64_t>(c);  // batch mean and inverse std per channel
}

void rule_add(Derivation& d) {
  d.same_shape();
  if (d.in(1).shape != d.op.shape)
    d.fail("Add inputs have different shapes " + shape_string(d.in(0).shape) + " and " + shape_string(d.in(1).shape));
  d.fwd = d.bwd = d.n();
}

void rule_dropout(Derivation& d) {
  d.same_shape();
  if (!(d.op.dropout_p >= 0.0f && d.op.dropout_p < 1.0f))
    d.fail("dropout p must be in [0, 1), got " + std::to_string(d.op.dropout_p));
  d.fwd = 2 * d.n();
  d.bwd = d.n();
  d.aux = static_cast<uint64_t>(d.op.numel());  // the keep mask, one byte per element (bool)
}

void rule_loss(Derivation& d) {
  const Op& x = d.in(0);
  if (x.shape.empty()) d.fail("loss input must have rank >= 1");
  if (!d.op.shape.empty()) d.fail("a loss produces a scalar; leave its shape empty");
  const double n = static_cast<double>(x.numel());
  d.fwd = d.op.kind == OpKind::MSELoss ? 3 * n : d.op.kind == OpKind::BCEWithLogitsLoss ? 6 * n : 5 * n;
  const double eps = d.op.attrs->label_smoothing;
  if (!(eps >= 0 && eps <= 1)) {
    std::ostringstream got;
    got << eps;
    d.fail("label_smoothing must lie in [0, 1], got " + got.str());
  }
  if (eps != 0) d.fwd += n;  // the rows' sums of log-probabilities
  d.bwd = 3 * n;
  d.saved = {d.op.inputs[0]};
  // Autocast computes losses in f32: a bf16/f16 input is cast, and what the
  // backward keeps is f32 — MSE the cast input, cross-entropy log_softmax's
  // log-probabilities — not the input itself.
  if (x.dtype == DType::BF16 || x.dtype == DType::F16) {
    d.saved.clear();
    d.aux = 4 * static_cast<uint64_t>(x.numel());
  }
}

void rule_generic(Derivation& d) {
  if (d.op.shape.empty()) d.fail("a Generic op needs a shape");
  d.fwd = d.n();
  d.bwd = 2 * d.n();
  d.saved = d.op.inputs;
  d.op.simulate_only = true;
}

void rule_conv(Derivation& d) {
  const Op& x = d.in(0);
  OpAttrs& a = d.op.attrs.edit();
  if (a.channels <= 0 && d.op.shape.size() >= 2) a.channels = d.op.shape[1];
  if (a.channels <= 0) d.fail("Conv needs its output channels (channels)");
  d.need_rank(x, 3, 4);
  const int64_t cin = x.shape[1];
  if (a.groups <= 0 || cin % a.groups != 0 || a.channels % a.groups != 0)
    d.fail("groups " + std::to_string(a.groups) + " must divide the input channels " + std::to_string(cin) +
           " and the output channels " + std::to_string(a.channels));
  d.set_shape(window_shape(d, a.channels, false));
  const double k = product(a.kernel) * static_cast<double>(cin / a.groups);
  d.params = tensor_bytes({a.channels, cin / a.groups}, d.op.dtype) * static_cast<uint64_t>(product(a.kernel)) +
             (a.bias ? tensor_bytes({a.channels}, d.op.dtype) : 0);
  d.fwd = 2 * d.n() * k;
  d.bwd = 2 * d.fwd;
  d.saved = {d.op.inputs[0]};  // grad_weight needs the input; the output is not read
}

// The gradient of a convolution as a layer (nn.ConvTranspose1d/2d): output
// (in - 1)·stride − pads + dilation·(kernel − 1) + output_padding + 1 per
// spatial dimension; weight (C, channels/groups, kernel...), as PyTorch's.
void rule_conv_transpose(Derivation& d) {
  const Op& x = d.in(0);
  OpAttrs& a = d.op.attrs.edit();
  if (a.channels <= 0 && d.op.shape.size() >= 2) a.channels = d.op.shape[1];
  if (a.channels <= 0) d.fail("ConvTranspose needs its output channels (channels)");
  d.need_rank(x, 3, 4);
  const int64_t cin = x.shape[1];
  if (a.groups <= 0 || cin % a.groups != 0 || a.channels % a.groups != 0)
    d.fail("groups " + std::to_string(a.groups) + " must divide the input channels " + std::to_string(cin) +
           " and the output channels " + std::to_string(a.channels));
  const std::size_t sp = x.shape.size() - 2;
  if (a.kernel.size() != sp)
    d.fail("ConvTranspose over a rank-" + std::to_string(x.shape.size()) + " input needs a kernel of " + std::to_string(sp) +
           " dimension(s), got " + shape_string(a.kernel));
  if (a.stride.empty()) a.stride.assign(sp, 1);
  if (a.pads.empty()) a.pads.assign(2 * sp, 0);
  if (a.dilation.empty()) a.dilation.assign(sp, 1);
  if (a.output_padding.empty()) a.output_padding.assign(sp, 0);
  if (a.stride.size() != sp || a.pads.size() != 2 * sp || a.dilation.size() != sp || a.output_padding.size() != sp)
    d.fail("stride, dilation and output_padding need " + std::to_string(sp) + " values and pads " + std::to_string(2 * sp));
  std::vector<int64_t> out = {x.shape[0], a.channels};
  for (std::size_t i = 0; i < sp; ++i) {
    const int64_t k = a.kernel[i], s = a.stride[i], dil = a.dilation[i], op = a.output_padding[i];
    if (k <= 0 || s <= 0 || dil <= 0 || a.pads[i] < 0 || a.pads[sp + i] < 0 || op < 0 || (op >= s && op >= dil))
      d.fail("kernel, stride and dilation must be positive, pads not negative, output_padding below the stride or the dilation");
    const int64_t o = (x.shape[2 + i] - 1) * s - a.pads[i] - a.pads[sp + i] + dil * (k - 1) + op + 1;
    if (o <= 0) d.fail("ConvTranspose output size " + std::to_string(o) + " along spatial dimension " + std::to_string(i));
    out.push_back(o);
  }
  d.set_shape(out);
  const double k = product(a.kernel) * static_cast<double>(a.channels / a.groups);
  d.params = tensor_bytes({cin, a.channels / a.groups}, d.op.dtype) * static_cast<uint64_t>(product(a.kernel)) +
             (a.bias ? tensor_bytes({a.channels}, d.op.dtype) : 0);
  d.fwd = 2 * static_cast<double>(x.numel()) * k;
  d.bwd = 2 * d.fwd;
  d.saved = {d.op.inputs[0]};  // convolution_backward keeps the input (and the weight: a parameter)
}

// Nearest or bilinear resizing of the spatial dimensions to the given shape
// (N and C kept). Its backward needs only the sizes: nothing is kept.
void rule_upsample(Derivation& d) {
  const Op& x = d.in(0);
  d.need_rank(x, 3, 4);
  if (d.op.shape.size() != x.shape.size() || d.op.shape[0] != x.shape[0] || d.op.shape[1] != x.shape[1])
    d.fail("Upsample's shape " + shape_string(d.op.shape) + " must keep the input's rank, batch and channels " +
           shape_string(x.shape));
  if (d.op.attrs->align_corners && !d.op.attrs->bilinear) d.fail("align_corners is a bilinear Upsample's");
  d.op.dtype = x.dtype;
  d.fwd = (d.op.attrs->bilinear ? 8.0 : 1.0) * d.n();
  d.bwd = d.fwd;
}

// Group normalisation over (N, C, ...): statistics per (sample, group);
// native_group_norm's backward reads the input and its mean and rstd (f32,
// N·groups each); weight and bias (C) are parameters.
void rule_groupnorm(Derivation& d) {
  d.need_rank(d.in(0), 2, 8);
  d.same_shape();
  const int64_t n = d.op.shape[0], c = d.op.shape[1], g = d.op.attrs->groups;
  if (g <= 0 || c % g != 0) d.fail("groups " + std::to_string(g) + " must divide the channels " + std::to_string(c));
  d.fwd = 5 * d.n();
  d.bwd = 8 * d.n();
  d.params = d.op.attrs->affine ? 2 * tensor_bytes({c}, d.op.dtype) : 0;
  d.saved = {d.op.inputs[0]};
  d.aux = 2 * Derivation::kStatBytes * static_cast<uint64_t>(n * g);
}

// torch.topk(x, k, axis) as the indices it picks (int64, x's shape with the
// axis k long); the values are a Gather of x by them, which keeps them. The
// indices have no gradient: nothing is kept.
void rule_topk(Derivation& d) {
  const Op& x = d.in(0);
  if (is_integer(x.dtype)) d.fail("TopK ranks floating point values; its input is " + std::string(dtype_name(x.dtype)));
  if (x.shape.empty()) d.fail("TopK needs an input of rank >= 1");
  const std::size_t ax = d.axis(d.op.attrs->axis, x.shape.size());
  const int64_t k = d.op.attrs->k;
  if (k < 1 || k > x.shape[ax])
    d.fail("k " + std::to_string(k) + " must be 1 to the axis' extent " + std::to_string(x.shape[ax]));
  std::vector<int64_t> s(x.shape.begin(), x.shape.end());
  s[ax] = k;
  d.op.dtype = DType::I64;
  d.set_shape(s);
  d.fwd = static_cast<double>(x.numel()) * static_cast<double>(k);
  d.bwd = 0;
}

// torch.gather(x, axis, index): the output has the index's shape; outside the
// axis the index may be shorter than x. gather's backward scatters dy by the
// index into x's shape; PyTorch's node keeps x and the index.
void rule_gather(Derivation& d) {
  const Op& x = d.in(0);
  const Op& index = d.in(1);
  if (is_integer(x.dtype)) d.fail("Gather picks floating point values; its input is " + std::string(dtype_name(x.dtype)));
  if (index.dtype != DType::I64) d.fail("Gather's index must be i64, got " + std::string(dtype_name(index.dtype)));
  if (index.shape.size() != x.shape.size())
    d.fail("Gather's index " + shape_string(index.shape) + " must have the rank of its input " + shape_string(x.shape));
  const std::size_t ax = d.axis(d.op.attrs->axis, x.shape.size());
  for (std::size_t k = 0; k < x.shape.size(); ++k)
    if (k != ax && index.shape[k] > x.shape[k])
      d.fail("Gather's index " + shape_string(index.shape) + " is longer than its input " + shape_string(x.shape) +
             " outside axis " + std::to_string(ax));
  d.op.dtype = x.dtype;
  d.set_shape(std::vector<int64_t>(index.shape.begin(), index.shape.end()));
  d.fwd = d.n();
  d.bwd = d.n() * static_cast<double>(x.shape[ax]);
  d.saved = {d.op.inputs[0], d.op.inputs[1]};
}

// F.pad: the last pads.size()/2 dimensions, the last first, a (before, after)
// pair each (PyTorch's order). constant: any of the input's dimensions, negative
// pads crop (constant_pad_nd); reflect, replicate, circular: 1 to 3 dimensions
// of a (C, ...) or (N, C, ...) input, as reflection_padNd, replication_padNd
// and _pad_circular take them, with reflect's pads below the extent and
// circular's at most it (one mirror or wrap per side). A new tensor; the
// backward of a constant pad is a slice of the gradient and keeps nothing,
// reflection_padNd_backward and replication_padNd_backward take the input
// (derivatives.yaml: `self`), so autograd keeps it, though the kernels read
// only its sizes; circular padding's copies into slices keep nothing.
void rule_pad(Derivation& d) {
  const Op& x = d.in(0);
  const OpAttrs& a = *d.op.attrs;
  static constexpr const char* kModes[] = {"constant", "reflect", "replicate", "circular"};
  if (a.pad_mode > static_cast<uint8_t>(PadMode::Circular)) d.fail("unknown pad mode " + std::to_string(a.pad_mode));
  const auto mode = static_cast<PadMode>(a.pad_mode);
  const std::size_t k = a.pads.size() / 2, rank = x.shape.size();
  if (a.pads.empty() || a.pads.size() % 2 != 0 || k > rank)
    d.fail("Pad needs a (before, after) pair of pads per padded dimension, at most " + std::to_string(rank) +
           " pairs for its input " + shape_string(x.shape) + ", got " + shape_string(a.pads));
  if (mode != PadMode::Constant && (k > 3 || rank < k + 1 || rank > k + 2))
    d.fail(std::string(kModes[a.pad_mode]) + " padding of " + std::to_string(k) + " dimension(s) needs a (C, ...) or (N, C, ...) input of rank " +
           std::to_string(k + 1) + " or " + std::to_string(k + 2) + " (1 to 3 padded dimensions), got " + shape_string(x.shape));
  std::vector<int64_t> s(x.shape.begin(), x.shape.end());
  for (std::size_t j = 0; j < k; ++j) {
    const std::size_t dim = rank - 1 - j;
    const int64_t b = a.pads[2 * j], e = a.pads[2 * j + 1], in = x.shape[dim];
    const std::string what = std::string(kModes[a.pad_mode]) + " padding (" + std::to_string(b) + ", " +
                             std::to_string(e) + ") of dimension " + std::to_string(dim) + " (size " + std::to_string(in) + ")";
    if (mode != PadMode::Constant && (b < 0 || e < 0)) d.fail(what + ": only constant padding crops (negative pads)");
    if (mode == PadMode::Reflect && (b >= in || e >= in)) d.fail(what + ": reflect pads must be below the size");
    if (mode == PadMode::Circular && (b > in || e > in)) d.fail(what + ": circular pads must be at most the size");
    s[dim] = in + b + e;
    if (s[dim] <= 0) d.fail(what + " leaves nothing");
  }
  d.op.dtype = x.dtype;
  d.set_shape(s);
  d.fwd = d.n();
  d.bwd = mode == PadMode::Constant ? static_cast<double>(x.numel()) : d.n();
  if (mode == PadMode::Reflect || mode == PadMode::Replicate) d.saved = {d.op.inputs[0]};
}

// An adaptive AvgPool (output_size): PyTorch's adaptive_avg_pool2d, whose
// windows [floor(i·in/out), ceil((i+1)·in/out)) cover the input once or more.
std::vector<int64_t> adaptive_shape(Derivation& d) {
  const Op& x = d.in(0);
  d.need_rank(x, 3, 4);
  const OpAttrs& a = *d.op.attrs;
  if (!a.kernel.empty() || !a.stride.empty() || !a.pads.empty() || a.ceil_mode || !a.count_include_pad)
    d.fail("an adaptive AvgPool (output_size) takes no kernel, stride, pads, ceil_mode or count_include_pad");
  if (a.output_size.size() != x.shape.size() - 2)
    d.fail("AvgPool over a rank-" + std::to_string(x.shape.size()) + " input needs an output_size of " +
           std::to_string(x.shape.size() - 2) + " dimension(s), got " + shape_string(a.output_size));
  std::vector<int64_t> out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), a.output_size.begin(), a.output_size.end());
  return out;
}

// torch.cumsum(x, axis): x's shape; the backward (a reversed running sum of
// dy) reads neither x nor y, so nothing is kept.
void rule_cumsum(Derivation& d) {
  const Op& x = d.in(0);
  if (is_integer(x.dtype)) d.fail("Cumsum sums floating point values; its input is " + std::string(dtype_name(x.dtype)));
  if (x.shape.empty()) d.fail("Cumsum needs an input of rank >= 1");
  d.op.dtype = x.dtype;
  d.same_shape();
  (void)d.axis(d.op.attrs->axis, x.shape.size());
  d.fwd = d.bwd = d.n();
}

void rule_pool(Derivation& d) {  // MaxPool, AvgPool
  if (d.op.kind == OpKind::AvgPool && !d.op.attrs->dilation.empty() &&
      std::any_of(d.op.attrs->dilation.begin(), d.op.attrs->dilation.end(), [](int64_t x) { return x != 1; }))
    d.fail("AvgPool takes no dilation");
  const bool adaptive = d.op.kind == OpKind::AvgPool && !d.op.attrs->output_size.empty();
  d.set_shape(adaptive ? adaptive_shape(d) : window_shape(d, d.in(0).shape.at(1), true));
  double k = product(d.op.attrs->kernel);  // empty when adaptive: 1
  if (adaptive)  // a window spans about in/out per axis (at least 1)
    for (std::size_t i = 0; i < d.op.attrs->output_size.size(); ++i)
      k *= std::ceil(static_cast<double>(d.in(0).shape[2 + i]) / static_cast<double>(d.op.attrs->output_size[i]));
  d.fwd = d.n() * k;
  d.bwd = static_cast<double>(d.in(0).numel()) + d.n();
  d.saved = {d.op.inputs[0]};
  if (d.op.kind == OpKind::MaxPool) d.aux = 8 * static_cast<uint64_t>(d.op.numel());  // int64 argmax indices
}

void rule_global_pool(Derivation& d) {
  const Op& x = d.in(0);
  d.need_rank(x, 3, 8);
  std::vector<int64_t> s(x.shape.size(), 1);
  s[0] = x.shape[0];
  s[1] = x.shape[1];
  d.set_shape(s);
  d.fwd = d.bwd = static_cast<double>(x.numel());
  d.saved = {d.op.inputs[0]};  // adaptive_avg_pool's backward reads its input
}

void rule_matmul(Derivation& d) {
  const Op& a = d.in(0);
  const Op& b = d.in(1);
  if (a.shape.size() < 2 || b.shape.size() < 2)
    d.fail("MatMul needs inputs of rank >= 2, got " + shape_string(a.shape) + " and " + shape_string(b.shape));
  const int64_t n = a.shape[a.shape.size() - 2], k = a.shape.back(), m = b.shape.back();
  if (b.shape[b.shape.size() - 2] != k)
    d.fail("MatMul inner dimensions differ: " + shape_string(a.shape) + " @ " + shape_string(b.shape));
  // Batch dimensions broadcast (numpy rules).
  const std::size_t ba = a.shape.size() - 2, bb = b.shape.size() - 2, r = std::max(ba, bb);
  std::vector<int64_t> batch(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - ba ? 1 : a.shape[i - (r - ba)];
    const int64_t y = i < r - bb ? 1 : b.shape[i - (r - bb)];
    if (x != y && x != 1 && y != 1)
      d.fail("MatMul batch dimensions do not broadcast: " + shape_string(a.shape) + " @ " + shape_string(b.shape));
    batch[i] = std::max(x, y);
  }
  std::vector<int64_t> out = batch;
  out.push_back(n);
  out.push_back(m);
  d.set_shape(out);
  const int64_t bp = static_cast<int64_t>(product(batch));
  const MatmulCopies copies = matmul_copies(a, b, batch);
  d.save_or_copy(d.op.inputs[0], copies.a, {bp, n, k});
  d.save_or_copy(d.op.inputs[1], copies.b, {bp, k, m});
  d.fwd += 2 * product(batch) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);
  d.bwd = 2 * d.fwd;
}

void rule_softmax(Derivation& d) {
  d.same_shape();
  (void)d.axis(d.op.attrs->axis, d.op.shape.size());
  d.fwd = d.bwd = 4 * d.n();
  d.saved = {d.self};  // softmax's backward reads its output
}

void rule_const(Derivation& d) {  // MulConst, DivConst, AddConst, MaskedFill
  d.same_shape();
  check_broadcast_onto(d, d.op.attrs->const_shape, d.op.shape);
  d.fwd = d.bwd = d.n();
  // Nothing activation-sized: the gradient needs only the constant (a
  // parameter, buffer or scalar: baseline).
  const Op& op = d.op;
  const auto cn = static_cast<uint64_t>(product(op.attrs->const_shape));
  if (!op.attrs->values.empty() && op.attrs->values.size() != cn)
    d.fail("the constant has " + std::to_string(op.attrs->values.size()) + " values, its shape " +
           shape_string(op.attrs->const_shape) + " holds " + std::to_string(cn));
  if (op.attrs->learned) {
    if (op.kind != OpKind::AddConst) d.fail("only an AddConst's or a Concat's constant can be learned");
    d.params = tensor_bytes(op.attrs->const_shape, op.dtype);
  }
}

void rule_concat(Derivation& d) {
  d.keep_input_dtype();
  const Op& x = d.in(0);
  if (x.shape.empty()) d.fail("Concat needs inputs of rank >= 1");
  const std::size_t ax = d.axis(d.op.attrs->axis, x.shape.size());
  std::vector<int64_t> s = x.shape;
  for (std::size_t i = 1; i < d.op.inputs.size(); ++i) {
    const Op& y = d.in(i);
    if (y.shape.size() != s.size()) d.fail("Concat inputs have different ranks");
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (k != ax && y.shape[k] != s[k])
        d.fail("Concat inputs " + shape_string(x.shape) + " and " + shape_string(y.shape) + " differ outside axis " + std::to_string(ax));
    }
    s[ax] += y.shape[ax];
  }
  // A constant piece (ViT's class token, torch.cat([cls.expand(B, -1, -1), x], 1)):
  // a parameter when learned, broadcast outside the axis; the backward still
  // only slices dy (and sums the token's share over the broadcast).
  const OpAttrs& a = *d.op.attrs;
  if (a.const_at >= 0) {
    const std::vector<int64_t>& c = a.const_shape;
    if (a.const_at > static_cast<int64_t>(d.op.inputs.size()))
      d.fail("Concat: const_at " + std::to_string(a.const_at) + " is past its " + std::to_string(d.op.inputs.size()) + " inputs");
    if (c.size() != s.size()) d.fail("Concat: the constant piece " + shape_string(c) + " must have the inputs' rank");
    for (std::size_t k = 0; k < s.size(); ++k)
      if (k != ax && c[k] != 1 && c[k] != s[k])
        d.fail("Concat: the constant piece " + shape_string(c) + " does not broadcast onto the inputs outside axis " + std::to_string(ax));
    s[ax] += c[ax];
    if (!a.values.empty() && a.values.size() != static_cast<uint64_t>(product(c)))
      d.fail("the constant has " + std::to_string(a.values.size()) + " values, its shape " + shape_string(c) + " holds " +
             std::to_string(product(c)));
  } else if (a.learned || !a.const_shape.empty() || !a.values.empty()) {
    d.fail("Concat: learned, const_shape and values describe a constant piece, which needs const_at");
  }
  d.op.dtype = x.dtype;
  d.set_shape(s);
  d.fwd = d.bwd = d.n();
  if (a.const_at >= 0 && a.learned) d.params = tensor_bytes(a.const_shape, d.op.dtype);
}

void rule_embedding(Derivation& d) {
  const Op& ids = d.in(0);
  if (!is_integer(ids.dtype)) d.fail("Embedding looks rows up by integer ids; its input is " + std::string(dtype_name(ids.dtype)));
  if (d.op.attrs->vocab <= 0) d.fail("Embedding needs the number of rows of its table (vocab)");
  if (d.op.shape.size() != ids.shape.size() + 1 || !std::equal(ids.shape.begin(), ids.shape.end(), d.op.shape.begin()))
    d.fail("shape " + shape_string(d.op.shape) + " must be the ids' shape " + shape_string(ids.shape) + " plus the row width");
  d.params = tensor_bytes({d.op.attrs->vocab, d.op.cols()}, d.op.dtype);
  d.fwd = d.bwd = d.n();
  d.saved = {d.op.inputs[0]};  // the ids, to scatter the gradient into the table
}

void rule_reshape(Derivation& d) {
  d.keep_input_dtype();
  const Op& x = d.in(0);
  if (d.op.shape.empty()) d.fail("Reshape needs its output shape");
  int64_t n = 1;
  for (int64_t s : d.op.shape) n *= s;
  if (n != x.numel()) d.fail("Reshape to " + shape_string(d.op.shape) + " changes the element count of " + shape_string(x.shape));
  auto st = d.op.attrs->copy ? std::nullopt : view_strides(x.shape, layout_of(x), d.op.shape);
  if (st) {
    d.view = true;
    d.strides = std::move(*st);
  } else {
    d.fwd = d.n();  // not viewable (e.g. after a transpose) or asked to copy: PyTorch copies
  }
}

void rule_transpose(Derivation& d) {
  d.keep_input_dtype();
  const Op& x = d.in(0);
  if (d.op.attrs->perm.empty())  // reversed axes, as ONNX's default
    for (std::size_t i = x.shape.size(); i-- > 0;) d.op.attrs.edit().perm.push_back(static_cast<int64_t>(i));
  const std::vector<int64_t>& perm = d.op.attrs->perm;
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != x.shape.size() || sorted[i] != static_cast<int64_t>(i))
      d.fail("perm " + shape_string(perm) + " is not a permutation of the input's " + std::to_string(x.shape.size()) + " axes");
  }
  std::vector<int64_t> s;
  const std::vector<int64_t> xs = layout_of(x);
  for (int64_t p : perm) {
    s.push_back(x.shape[static_cast<std::size_t>(p)]);
    d.strides.push_back(xs[static_cast<std::size_t>(p)]);
  }
  d.set_shape(s);
  d.view = true;
}

void rule_slice(Derivation& d) {
  d.keep_input_dtype();
  const Op& x = d.in(0);
  if (x.shape.empty()) d.fail("Slice needs an input of rank >= 1");
  const OpAttrs& a = *d.op.attrs;
  const std::size_t ax = d.axis(a.axis, x.shape.size());
  const int64_t dim = x.shape[ax];
  if (a.step <= 0) d.fail("Slice step must be positive, got " + std::to_string(a.step));
  auto clampi = [&](int64_t i) { return std::clamp(i < 0 ? i + dim : i, int64_t{0}, dim); };
  const int64_t b = clampi(a.start), e = clampi(a.end);
  if (e <= b) d.fail("Slice [" + std::to_string(a.start) + ", " + std::to_string(a.end) + ") of axis " + std::to_string(ax) + " (size " + std::to_string(dim) + ") is empty");
  std::vector<int64_t> s = x.shape;
  s[ax] = (e - b + a.step - 1) / a.step;
  d.set_shape(s);
  d.strides = layout_of(x);
  d.strides[ax] *= a.step;
  d.view = true;
}

void rule_expand(Derivation& d) {
  d.keep_input_dtype();
  const Op& x = d.in(0);
  const auto& s = d.op.shape;
  if (s.size() < x.shape.size()) d.fail("Expand to " + shape_string(s) + " has a lower rank than the input " + shape_string(x.shape));
  const std::size_t lead = s.size() - x.shape.size();
  d.strides.assign(s.size(), 0);
  const std::vector<int64_t> xs = layout_of(x);
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    const int64_t from = x.shape[i], to = s[lead + i];
    if (from != to && from != 1) d.fail("cannot expand " + shape_string(x.shape) + " to " + shape_string(s));
    d.strides[lead + i] = from == to ? xs[i] : 0;
  }
  d.bwd = d.n();  // the gradient is summed over the broadcast dimensions
  d.view = true;
}

// softmax(q·kᵀ · scale) · v over (..., Tq, D), (..., Tk, D), (..., Tk, Dv),
// the leading dimensions equal (rank 3 or 4, as the kernels take them). What
// PyTorch's CPU flash kernel keeps for its backward: q, k, v, the output and
// each row's logsumexp in f32 (aux); the backward recomputes the scores.
void rule_attention(Derivation& d) {
  const Op &q = d.in(0), &k = d.in(1), &v = d.in(2);
  d.need_rank(q, 3, 4);
  if (k.shape.size() != q.shape.size() || v.shape.size() != q.shape.size())
    d.fail("Attention needs q, k and v of one rank, got " + shape_string(q.shape) + ", " + shape_string(k.shape) +
           " and " + shape_string(v.shape));
  const std::size_t r = q.shape.size();
  for (std::size_t i = 0; i + 2 < r; ++i)
    if (k.shape[i] != q.shape[i] || v.shape[i] != q.shape[i])
      d.fail("Attention needs q, k and v with the same leading dimensions, got " + shape_string(q.shape) + ", " +
             shape_string(k.shape) + " and " + shape_string(v.shape));
  if (k.shape[r - 1] != q.shape[r - 1]) d.fail("Attention: q and k differ in their last dimension: " + shape_string(q.shape) + " and " + shape_string(k.shape));
  if (v.shape[r - 2] != k.shape[r - 2]) d.fail("Attention: k and v differ in length: " + shape_string(k.shape) + " and " + shape_string(v.shape));
  if (d.op.attrs->scale < 0) d.fail("Attention: scale must be positive");
  // An additive mask (PyTorch's float attn_mask): a constant broadcast onto
  // the scores (leading dimensions, tq, tk), right-aligned.
  const OpAttrs& a = *d.op.attrs;
  if (!a.const_shape.empty() || !a.values.empty()) {
    std::vector<int64_t> scores(q.shape.begin(), q.shape.end());
    scores[r - 1] = k.shape[r - 2];
    const std::vector<int64_t>& m = a.const_shape;
    bool fits = m.size() <= r;
    for (std::size_t i = 0; fits && i < m.size(); ++i) {
      const int64_t want = scores[r - m.size() + i];
      fits = m[i] == 1 || m[i] == want;
    }
    if (!fits) d.fail("Attention: the mask " + shape_string(m) + " does not broadcast onto the scores " + shape_string(scores));
    if (!a.values.empty() && a.values.size() != static_cast<uint64_t>(product(m)))
      d.fail("the mask has " + std::to_string(a.values.size()) + " values, its shape " + shape_string(m) + " holds " +
             std::to_string(product(m)));
  }
  std::vector<int64_t> out(q.shape.begin(), q.shape.end());
  out[r - 1] = v.shape[r - 1];
  d.set_shape(out);
  // PyTorch's kernel lays its output out in q's dimension order: after a
  // GPT's transposed q, (batch, t, heads, d) in memory, so the transpose and
  // reshape that merge the heads are views. Dimensions by q's strides,
  // largest first (ties in order); the output dense in that order.
  const std::vector<int64_t> qs = layout_of(q);
  std::vector<std::size_t> order(r);
  for (std::size_t i = 0; i < r; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return qs[a] > qs[b]; });
  if (order.back() == r - 1 && !std::is_sorted(order.begin(), order.end())) {
    d.strides.assign(r, 0);
    int64_t stride = 1;
    for (std::size_t i = r; i-- > 0;) d.strides[order[i]] = stride, stride *= out[order[i]];
  }
  const double heads = product(std::vector<int64_t>(q.shape.begin(), q.shape.end() - 2));
  const double tq = static_cast<double>(q.shape[r - 2]), tk = static_cast<double>(k.shape[r - 2]);
  const double dq = static_cast<double>(q.shape[r - 1]), dv = static_cast<double>(v.shape[r - 1]);
  // Scores and the product with v, plus the softmax's few per score; the
  // backward recomputes the scores, then dv, dp, dq and dk.
  d.fwd = heads * tq * tk * (2 * dq + 2 * dv + 4);
  d.bwd = heads * tq * tk * (2 * dq + 4 * dv + 4 * dq + 6);
  d.saved = {d.op.inputs[0]};
  for (int i : {1, 2})
    if (std::find(d.saved.begin(), d.saved.end(), d.op.inputs[static_cast<std::size_t>(i)]) == d.saved.end())
      d.saved.push_back(d.op.inputs[static_cast<std::size_t>(i)]);
  d.saved.push_back(d.self);
  d.aux = static_cast<uint64_t>(heads * tq) * Derivation::kStatBytes;
}

// The pointwise family: one rule for every function of pointwise_fns.h. The
// output broadcasts its operands (PyTorch's rule); saved is what the
// derivatives of the operands that need a gradient read (the reads columns):
// an activation that carries one (grad_flow.h), or a learned constant.
void rule_pointwise(Derivation& d) {
  Op& op = d.op;
  if (op.attrs->fn >= pw::kFnCount) d.fail("unknown pointwise function " + std::to_string(op.attrs->fn));
  const pw::FnInfo& f = pw::kFns[op.attrs->fn];
  const PwOperands ops = pointwise_operands(op);
  if (!ops.problem.empty()) d.fail(std::string(f.name) + ": " + ops.problem);
  const auto& cs = op.attrs->const_shape;
  const auto cn = static_cast<uint64_t>(product(cs));
  if (!op.attrs->values.empty() && op.attrs->values.size() != cn)
    d.fail("the constant has " + std::to_string(op.attrs->values.size()) + " values, its shape " + shape_string(cs) +
           " holds " + std::to_string(cn));
  if (op.attrs->learned && op.attrs->const_at < 0) d.fail("a learned constant needs its operand (const_at)");
  // Broadcast every operand's shape, right-aligned.
  std::vector<int64_t> out;
  for (int k = 0; k < ops.arity; ++k) {
    const PwOperand& o = ops.at[k];
    std::vector<int64_t> s;  // a scalar: []
    if (o.src == PwOperand::Constant) s = cs;
    if (o.src == PwOperand::Input) {
      const Shape& in = d.in(static_cast<std::size_t>(o.input)).shape;
      s.assign(in.begin(), in.end());
    }
    if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
    for (std::size_t i = 0; i < s.size(); ++i) {
      int64_t& to = out[out.size() - s.size() + i];
      if (s[i] != to && s[i] != 1 && to != 1)
        d.fail(std::string(f.name) + ": operand " + std::to_string(k) + " of shape " + shape_string(s) +
               " does not broadcast onto " + shape_string(out));
      if (to == 1) to = s[i];
    }
  }
  if (out.empty()) out = {1};
  // A rank-0 result is written [1] (remat's tensors have a rank); a given shape may say so.
  if (!(op.shape.size() == 1 && op.shape[0] == 1 && product(out) == 1)) d.set_shape(out);
  const double n = d.n();
  d.fwd = f.fwd_flops * n;
  d.bwd = f.bwd_flops * n;
  for (int k = 0; k < ops.arity; ++k) {
    if (!pointwise_needs_grad(op, ops, k, d.before)) continue;
    for (int j = 0; j < 3; ++j)
      if ((f.reads[k] & (1 << j)) && ops.at[j].src == PwOperand::Input) {
        const int u = op.inputs[static_cast<std::size_t>(ops.at[j].input)];
        if (std::find(d.saved.begin(), d.saved.end(), u) == d.saved.end()) d.saved.push_back(u);
      }
    if ((f.reads[k] & pw::kY) && std::find(d.saved.begin(), d.saved.end(), d.self) == d.saved.end())
      d.saved.push_back(d.self);
  }
  if (op.attrs->learned) d.params = tensor_bytes(cs, op.dtype);
}

// sum, mean, amax over axes (empty: all), keepdim or not; a reduction to one
// value without keepdim is [1]. amax keeps its input and its result
// (PyTorch's amax backward); sum and mean keep nothing.
void rule_reduce(Derivation& d) {
  Op& op = d.op;
  const Op& x = d.in(0);
  if (op.attrs->fn > static_cast<uint8_t>(pw::ReduceFn::Amax)) d.fail("unknown reduction " + std::to_string(op.attrs->fn));
  std::vector<int64_t> axes;
  for (const int64_t a : op.attrs->axes) axes.push_back(static_cast<int64_t>(d.axis(a, x.shape.size())));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty())
    for (std::size_t i = 0; i < x.shape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes != op.attrs->axes) op.attrs.edit().axes = axes;
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    const bool r = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
    if (!r) out.push_back(x.shape[i]);
    else if (op.attrs->keepdim) out.push_back(1);
  }
  if (out.empty()) out = {1};
  d.set_shape(out);
  d.fwd = d.bwd = static_cast<double>(x.numel());
  if (op.attrs->fn == static_cast<uint8_t>(pw::ReduceFn::Amax)) d.saved = {op.inputs[0], d.self};
}

struct KindRule {
  OpKind kind;
  int min_inputs, max_inputs;
  void (*derive)(Derivation&);
  bool runs;  // a backend has its kernels (core/exec/exec_kinds.h)
};

constexpr int kMany = 256;
#define REMAT_SIM_RULE(Kind, rule, lo, hi) KindRule{OpKind::Kind, lo, hi, rule_##rule, false},
#define REMAT_RUN_RULE(Kind, entry, rule, lo, hi) KindRule{OpKind::Kind, lo, hi, rule_##rule, true},
constexpr std::array<KindRule, kOpKindCount> kRules = {REMAT_OP_KINDS(REMAT_SIM_RULE, REMAT_RUN_RULE)};
#undef REMAT_SIM_RULE
#undef REMAT_RUN_RULE

constexpr const KindRule& rule_of(OpKind k) { return kRules[static_cast<std::size_t>(k)]; }
constexpr bool exec_listed(OpKind k) { return rule_of(k).runs; }

}  // namespace

PwOperands pointwise_operands(const Op& op) {
  PwOperands out;
  if (op.attrs->fn >= pw::kFnCount) {
    out.problem = "unknown function";
    return out;
  }
  out.arity = pw::kFns[op.attrs->fn].arity;
  const int64_t c = op.attrs->const_at;
  const bool has_const = c >= 0;
  if (c >= out.arity) {
    out.problem = "const_at " + std::to_string(c) + " is not an operand (the function takes " + std::to_string(out.arity) + ")";
    return out;
  }
  std::size_t next = 0;
  int scalars = 0;
  for (int k = 0; k < out.arity; ++k) {
    if (has_const && k == c) out.at[k] = {PwOperand::Constant, -1};
    else if (next < op.inputs.size()) out.at[k] = {PwOperand::Input, static_cast<int>(next++)};
    else out.at[k] = {PwOperand::Scalar, -1}, ++scalars;
  }
  if (next < op.inputs.size())
    out.problem = std::to_string(op.inputs.size()) + " inputs" + (has_const ? " and a constant" : "") + " are more than its " +
                  std::to_string(out.arity) + " operand(s)";
  else if (scalars > 1 || (scalars == 1 && out.at[out.arity - 1].src != PwOperand::Scalar))
    out.problem = "only its last operand may be the scalar; give the others as inputs or the constant";
  else if (!has_const && (!op.attrs->const_shape.empty() || !op.attrs->values.empty() || op.attrs->learned))
    out.problem = "a constant without its operand (const_at)";
  return out;
}

bool pointwise_needs_grad(const Op& op, const PwOperands& ops, int k, std::span<const Op> before) {
  const PwOperand& o = ops.at[k];
  if (o.src == PwOperand::Constant) return op.attrs->learned;
  if (o.src != PwOperand::Input) return false;
  return carries_grad(before, op.inputs[static_cast<std::size_t>(o.input)]);
}

uint64_t buffer_bytes(const Op& op) {
  if (op.kind != OpKind::BatchNorm || op.shape.size() < 2) return 0;
  return std::min(op.param_bytes, batchnorm_buffer_bytes(op.shape[1]));
}

// The constant kernels need the values and a constant that repeats over the
// input: its shape, without leading 1s, equals the input's last dimensions.
static bool const_kernel_ready(const Op& op) {
  if (op.kind != OpKind::MulConst && op.kind != OpKind::DivConst && op.kind != OpKind::AddConst &&
      op.kind != OpKind::MaskedFill)
    return true;
  const auto& cs = op.attrs->const_shape;
  if (op.attrs->values.size() != static_cast<std::size_t>(product(cs)) && !(op.attrs->learned && op.attrs->values.empty())) return false;
  std::size_t lead = 0;
  while (lead < cs.size() && cs[lead] == 1) ++lead;
  const std::size_t r = cs.size() - lead;
  if (r > op.shape.size()) return false;
  return std::equal(cs.begin() + static_cast<std::ptrdiff_t>(lead), cs.end(), op.shape.end() - static_cast<std::ptrdiff_t>(r));
}

std::string kernel_attr_problem(const Op& op) {
  const bool conv = op.kind == OpKind::Conv || op.kind == OpKind::ConvTranspose;
  if (!conv && op.kind != OpKind::MaxPool && op.kind != OpKind::AvgPool) return {};
  const OpAttrs& a = *op.attrs;
  const std::size_t sp = a.kernel.size();  // pads: all begins, then all ends (ONNX order); none when adaptive
  for (std::size_t i = 0; i < sp; ++i)
    if (a.pads.at(i) != a.pads.at(sp + i)) return "pads that differ at the two ends of a dimension";
  return {};
}

bool target_loss_keeps_f32_input(const Op& op) {
  return has_target(op.kind) && op.inputs.size() == 1 && op.aux_bytes > 0 &&
         std::find(op.saved.begin(), op.saved.end(), op.inputs[0]) == op.saved.end();
}

bool ce_keeps_log_probs(const Op& op) {
  return op.kind == OpKind::SoftmaxCELoss && op.inputs.size() == 1 && op.aux_bytes > 0 &&
         std::find(op.saved.begin(), op.saved.end(), op.inputs[0]) == op.saved.end();
}

// Pointwise and Reduce: the constant's values (or a learned one); amax keeps
// what its backward reads. (What a Pointwise backward reads depends on which
// inputs have gradients: core/exec/run_check.cpp checks it, with the model.)
static std::string family_problem(const Op& op) {
  if (op.kind == OpKind::Reduce) {
    if (op.shape.size() > 8) return "rank over 8";
    const bool keeps_input = std::find(op.saved.begin(), op.saved.end(), op.inputs.at(0)) != op.saved.end();
    const bool keeps_result = std::any_of(op.saved.begin(), op.saved.end(), [&](int s) { return s != op.inputs.at(0); });
    if (op.attrs->fn == static_cast<uint8_t>(pw::ReduceFn::Amax) && (!keeps_input || !keeps_result))
      return "amax's backward reads its input and its result, which its saved set leaves out";
    return {};
  }
  const PwOperands ops = pointwise_operands(op);
  if (!ops.problem.empty()) return ops.problem;
  if (op.shape.size() > 8) return "rank over 8";
  const auto cn = static_cast<std::size_t>(product(op.attrs->const_shape));
  if (op.attrs->const_at >= 0 && !op.attrs->learned && op.attrs->values.size() != cn)
    return "its constant operand's values are unknown";
  return {};
}

std::string exec_problem(const Op& op) {
  if (op.simulate_only)
    return op.kind == OpKind::Generic ? "no kernel runs a Generic op (an op remat has no kind for)" : "marked simulate_only";
  // Token ids: an integer input (the Embedding reads it; check_executable
  // refuses other readers).
  if (op.kind == OpKind::Input && (op.dtype == DType::I32 || op.dtype == DType::I64))
    return op.bytes >= tensor_bytes(op.shape, op.dtype) ? "" : "its bytes do not hold its elements";
  // Floating point tensors run in f32, bf16 or f16 (stored so, computed in
  // f32: docs/memory-model.md#mixed-precision-autocast).
  // Integer activations: a TopK's indices and views of them (a Gather reads them).
  if (is_integer(op.dtype) && !(op.kind == OpKind::TopK || op.view))
    return "its dtype is " + std::string(dtype_name(op.dtype)) + "; only f32, bf16 and f16 run";
  if (op.kind != OpKind::Input && !exec_listed(op.kind)) return "no kernel runs a " + std::string(kind_name(op.kind));
  if (!op.view && op.bytes < tensor_bytes(op.shape, op.dtype)) return "it owns fewer bytes than its elements take";
  if (std::string why = kernel_attr_problem(op); !why.empty()) return "the kernels take no " + why;
  // A Linear that PyTorch would feed a contiguous copy of its input keeps it in
  // aux(v); the kernels multiply their input in place and fill no such copy.
  // (A Linear's is made when it is the copy of its input: run_check.cpp.)
  if (op.kind == OpKind::Dense && op.aux_bytes > 0)
    return "it keeps a contiguous copy of its input (aux), which the kernels do not make";
  // The loss kernels read their input again in the backward, or, for a
  // cross-entropy that keeps them (a PyTorch capture), its log-probabilities.
  // A loss that keeps something else describes memory these kernels do not
  // reproduce.
  if (is_loss(op.kind) && !ce_keeps_log_probs(op) && !target_loss_keeps_f32_input(op) &&
      (op.inputs.empty() || std::find(op.saved.begin(), op.saved.end(), op.inputs[0]) == op.saved.end()))
    return "the loss's backward reads its input, which its saved set leaves out";
  // The softmax kernel normalises rows: the last axis only.
  if (op.kind == OpKind::Softmax && op.attrs->axis != -1 && op.attrs->axis != static_cast<int64_t>(op.shape.size()) - 1)
    return "the kernel takes a softmax over the last axis only";
  if (!const_kernel_ready(op)) return "its constant's values are unknown or do not repeat over the input's last dimensions";
  // A Concat's constant piece runs as a parameter (a class token); a fixed one has no kernel.
  if (op.kind == OpKind::Concat && op.attrs->const_at >= 0 && !op.attrs->learned)
    return "its constant piece is fixed, not learned: no kernel concatenates a fixed piece";
  // The product's kernels take one operand per input (broadcast batches
  // included): a tensor multiplied by itself (x @ x) is not run.
  if (op.kind == OpKind::MatMul && op.inputs.size() == 2 && op.inputs[0] == op.inputs[1])
    return "a tensor multiplied by itself";
  // The attention kernels read q, k, v and the output again in the backward,
  // and keep each row's logsumexp (f32) in aux.
  if (op.kind == OpKind::Attention) {
    if (!op.attrs->const_shape.empty() && op.attrs->values.empty()) return "its mask's values are unknown";
    for (int u : op.inputs)
      if (std::find(op.saved.begin(), op.saved.end(), u) == op.saved.end()) return "its saved set leaves out q, k or v";
    const bool keeps_output = std::any_of(op.saved.begin(), op.saved.end(), [&](int s) {
      return std::find(op.inputs.begin(), op.inputs.end(), s) == op.inputs.end();
    });
    if (!keeps_output || op.aux_bytes < 4 * static_cast<uint64_t>(op.rows()))
      return "it does not keep its output and a logsumexp per row";
  }
  // The norms' kernels write their statistics (norm_stat_count of each, mean
  // then rstd) into aux: f32, or, for a bf16/f16 norm captured on the CPU
  // (PyTorch's CPU kernels keep them in the input's dtype, 1.13 and 2.6
  // alike), the op's dtype, narrowed there by the mixed call.
  if (const int64_t count = norm_stat_count(op); count > 0) {
    if (op.aux_bytes < 8 * static_cast<uint64_t>(count) && !norm_stats_in_dtype(op)) {
      const char* per = op.kind == OpKind::LayerNorm   ? "mean and rstd per row"
                        : op.kind == OpKind::GroupNorm ? "mean and rstd per sample and group"
                                                       : "batch mean and inverse std per channel";
      return std::string("it keeps no ") + per + " (aux)";
    }
  }
  if (op.kind == OpKind::Pointwise || op.kind == OpKind::Reduce) return family_problem(op);
  return {};
}

int64_t norm_stat_count(const Op& op) {
  switch (op.kind) {
    case OpKind::LayerNorm: return op.rows();
    case OpKind::GroupNorm: return op.shape.empty() ? 0 : op.shape[0] * op.attrs->groups;
    case OpKind::BatchNorm: return op.shape.size() < 2 ? 0 : op.shape[1];
    default: return 0;
  }
}

bool norm_stats_in_dtype(const Op& op) {
  const int64_t count = norm_stat_count(op);
  // Past the statistics, an aux may hold what else the capture saw saved
  // (an InstanceNorm, run by PyTorch as a BatchNorm of one sample, keeps its
  // repeated weight there: 6 bytes a channel in all); from 8 bytes a
  // statistic pair on, it holds f32 statistics (PyTorch's CUDA kernels).
  const auto bytes = static_cast<uint64_t>(count);
  return count > 0 && (op.dtype == DType::BF16 || op.dtype == DType::F16) && op.aux_bytes >= 4 * bytes &&
         op.aux_bytes < 8 * bytes;
}

bool executable(const Op& op) { return exec_problem(op).empty(); }

std::string where_label(std::string_view where, int id) { return where.empty() ? "op " + std::to_string(id) : std::string(where); }

Op rule_fields(const Op& op) {
  Op out;
  out.kind = op.kind;
  out.inputs = op.inputs;
  out.shape = op.shape;
  out.dtype = op.dtype;
  out.act = op.act;
  out.dropout_p = op.dropout_p;
  out.attrs = op.attrs;
  return out;
}

Op derived_by_rules(const Op& op, std::span<const Op> before, std::string_view where) {
  Op probe = rule_fields(op);
  derive_op(probe, before, where, false);
  return probe;
}

void derive_op(Op& op, std::span<const Op> before, std::string_view where, bool explicit_saved) {
  const int self = static_cast<int>(before.size());
  const KindRule& rule = rule_of(op.kind);
  Derivation d(op, before, where, self);
  const int n_in = static_cast<int>(op.inputs.size());
  if (n_in < rule.min_inputs || n_in > rule.max_inputs) {
    const std::string want = rule.min_inputs == rule.max_inputs ? std::to_string(rule.min_inputs)
                             : rule.max_inputs == kMany      ? "at least " + std::to_string(rule.min_inputs)
                                                             : std::to_string(rule.min_inputs) + " to " + std::to_string(rule.max_inputs);
    d.fail(d.kind() + " takes " + want + " input(s), got " + std::to_string(n_in));
  }
  if (op.kind == OpKind::Dense && op.act != Activation::None && op.act != Activation::ReLU && op.act != Activation::Tanh)
    d.fail("Dense activation must be none, relu or tanh");
  rule.derive(d);
  // Where autocast casts an input, autograd saves the cast in the input's
  // place: a copy in the cast's dtype, private to the op (autocast.h).
  for (const CastCopy& c : cast_copies(op, before)) {
    const int u = op.inputs[static_cast<std::size_t>(c.input)];
    d.saved.erase(std::remove(d.saved.begin(), d.saved.end(), u), d.saved.end());
    d.aux += c.bytes;
  }
  for (int64_t x : op.shape) {
    if (x <= 0) d.fail("dimension " + std::to_string(x) + " in shape " + shape_string(op.shape) + " must be positive");
  }
  const uint64_t shape_bytes = tensor_bytes(op.shape, op.dtype);
  op.view = d.view;
  if (d.view) {
    if (op.bytes != 0) d.fail("a " + d.kind() + " is a view of its input: it owns no bytes (leave 'bytes' out)");
    op.storage = d.in(0).storage;
    op.strides = std::move(d.strides);
  } else {
    if (op.bytes == 0) op.bytes = shape_bytes;
    op.storage = self;
    if (d.strides.empty()) op.strides.reset();  // contiguous (layout_of)
    else op.strides = std::move(d.strides);     // dense in another dimension order
  }
  if (op.fwd_flops <= 0) op.fwd_flops = d.fwd;
  if (op.bwd_flops <= 0) op.bwd_flops = d.bwd;
  if (!explicit_saved) op.saved = std::move(d.saved);
  if (op.param_bytes == 0) op.param_bytes = d.params;
  if (op.aux_bytes == 0) op.aux_bytes = d.aux;
  for (int s : op.saved) {
    if (s != self && std::find(op.inputs.begin(), op.inputs.end(), s) == op.inputs.end())
      d.fail("saved tensor " + std::to_string(s) + " is neither an input nor the op itself");
  }
}

}  // namespace remat
