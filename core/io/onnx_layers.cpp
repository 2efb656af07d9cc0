// The elements of real networks, as torch.onnx.export writes them for
// torchvision models and attention blocks (docs/model-format.md): Conv,
// BatchNormalization, pooling, Softmax inside the graph, Mul/Div/Add/Sub by a
// constant, Where with a constant mask, Gather from a table, x*Sigmoid(x),
// and the views (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand,
// Slice, Split). Each returns false (the node becomes Generic) when the node
// is not the expected form.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "core/io/onnx_importer.h"
#include "core/model/op_rules.h"

namespace remat::onnx_import {

std::optional<std::vector<int64_t>> Importer::known_shape(const std::string& name) const {
  if (const TensorProto* t = constant(name)) return dims(t);
  auto it = shapes_.find(name);
  if (it == shapes_.end()) return std::nullopt;
  return it->second;
}

int Importer::try_add(Op op, const std::string& output, const NodeProto& n, bool explicit_saved) {
  try {
    return add_op(std::move(op), output, where(n), explicit_saved);
  } catch (const InputError&) {
    return -1;  // attributes the kind's rule refuses: left to generic()
  }
}

int Importer::add_kind(OpKind k, const NodeProto& n, std::vector<int> inputs, std::vector<int64_t> shape) {
  Op op;
  op.kind = k;
  op.name = op_name(n);
  op.inputs = std::move(inputs);
  op.shape = std::move(shape);
  return try_add(std::move(op), out0(n), n);
}

bool Importer::conv(const NodeProto& n, int x) {
  if (n.input_size() < 2 || activation(n.input(0)) != x) return false;
  const auto w = known_shape(n.input(1));
  if (!w || w->size() < 3 || !is_constant(n.input(1))) return false;
  std::string pad = "NOTSET";
  for (const auto& a : n.attribute())
    if (a.name() == "auto_pad") pad = a.s();
  if (pad != "NOTSET") return false;
  Op op;
  op.kind = OpKind::Conv;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().channels = (*w)[0];
  op.attrs.edit().kernel = attr_ints(n, "kernel_shape");
  if (op.attrs->kernel.empty()) op.attrs.edit().kernel.assign(w->begin() + 2, w->end());
  op.attrs.edit().stride = attr_ints(n, "strides");
  op.attrs.edit().pads = attr_ints(n, "pads");
  op.attrs.edit().dilation = attr_ints(n, "dilations");
  op.attrs.edit().groups = attr_int(n, "group", 1);
  op.attrs.edit().bias = n.input_size() > 2 && !n.input(2).empty();
  const Op& in = model_.op(x);
  if (in.shape.size() < 3 || in.shape.size() > 4 || w->size() != in.shape.size()) return false;
  if ((*w)[1] * op.attrs->groups != in.shape[1])
    fail_node(origin_, n, "weight '" + n.input(1) + "' is " + shape_str(*w) + " but the input has " +
                              std::to_string(in.shape[1]) + " channels in " + std::to_string(op.attrs->groups) + " group(s)");
  // The file's weights, (channels, C/groups, kernel...) as the kernels take them.
  std::vector<std::shared_ptr<const std::vector<float>>> init = {initializer(n, n.input(1))};
  if (op.attrs->bias) init.push_back(initializer(n, n.input(2), (*w)[0]));
  set_params(op, n, std::move(init));
  return try_add(std::move(op), out0(n), n) >= 0;
}

// torch's nn.ConvTranspose1d/2d: weight (C, channels/group, kernel...).
bool Importer::conv_transpose(const NodeProto& n, int x) {
  if (n.input_size() < 2 || activation(n.input(0)) != x) return false;
  const auto w = known_shape(n.input(1));
  if (!w || w->size() < 3 || !is_constant(n.input(1))) return false;
  for (const auto& a : n.attribute())
    if ((a.name() == "auto_pad" && a.s() != "NOTSET") || a.name() == "output_shape") return false;
  const Op& in = model_.op(x);
  if (in.shape.size() < 3 || in.shape.size() > 4 || w->size() != in.shape.size() || (*w)[0] != in.shape[1]) return false;
  Op op;
  op.kind = OpKind::ConvTranspose;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().groups = attr_int(n, "group", 1);
  op.attrs.edit().channels = (*w)[1] * op.attrs->groups;
  op.attrs.edit().kernel = attr_ints(n, "kernel_shape");
  if (op.attrs->kernel.empty()) op.attrs.edit().kernel.assign(w->begin() + 2, w->end());
  op.attrs.edit().stride = attr_ints(n, "strides");
  op.attrs.edit().pads = attr_ints(n, "pads");
  op.attrs.edit().dilation = attr_ints(n, "dilations");
  op.attrs.edit().output_padding = attr_ints(n, "output_padding");
  op.attrs.edit().bias = n.input_size() > 2 && !n.input(2).empty();
  std::vector<std::shared_ptr<const std::vector<float>>> init = {initializer(n, n.input(1))};
  if (op.attrs->bias) init.push_back(initializer(n, n.input(2), op.attrs->channels));
  set_params(op, n, std::move(init));
  return try_add(std::move(op), out0(n), n) >= 0;
}

// F.interpolate as torch exports it: Resize with mode nearest (asymmetric
// coordinates, floor: PyTorch's legacy nearest) or linear (pytorch_half_pixel
// or half_pixel: align_corners=False; align_corners), batch and channels kept.
bool Importer::resize(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  auto out = known_shape(out0(n));
  if (!out) {  // ONNX's inference leaves Resize alone when scales or sizes are computed: from their folded values
    if (n.input_size() > 3 && !n.input(3).empty()) {
      out = ints(constant(n.input(3)));
    } else if (n.input_size() > 2 && !n.input(2).empty()) {
      if (auto scales = floats(constant(n.input(2))); scales && scales->size() == in.shape.size()) {
        out.emplace();
        for (std::size_t k = 0; k < scales->size(); ++k)
          out->push_back(static_cast<int64_t>(std::floor(static_cast<double>(in.shape[k]) * (*scales)[k])));
      }
    }
  }
  if (!out || out->size() != in.shape.size() || in.shape.size() < 3 || in.shape.size() > 4 || (*out)[0] != in.shape[0] ||
      (*out)[1] != in.shape[1])
    return false;
  std::string mode = "nearest", ctm = "half_pixel", nearest = "round_prefer_floor";
  for (const auto& a : n.attribute()) {
    if (a.name() == "mode") mode = a.s();
    if (a.name() == "coordinate_transformation_mode") ctm = a.s();
    if (a.name() == "nearest_mode") nearest = a.s();
  }
  Op op;
  op.kind = OpKind::Upsample;
  op.name = op_name(n);
  op.inputs = {x};
  op.shape = *out;
  if (mode == "nearest" && ctm == "asymmetric" && nearest == "floor") {
    op.attrs.edit().bilinear = false;
  } else if (mode == "linear" && (ctm == "pytorch_half_pixel" || ctm == "half_pixel" || ctm == "align_corners")) {
    op.attrs.edit().bilinear = true;
    op.attrs.edit().align_corners = ctm == "align_corners";
  } else {
    return false;
  }
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::batchnorm(const NodeProto& n, int x) {
  if (n.input_size() != 5 || activation(n.input(0)) != x) return false;
  for (int k = 1; k < 5; ++k)
    if (!is_constant(n.input(k))) return false;
  // Opset 14+ says so; before, a training export lists the running statistics
  // as extra outputs.
  const bool training = opset_ >= 14 ? attr_int(n, "training_mode", 0) != 0 : n.output_size() > 1;
  if (!training) eval_mode_.push_back(where(n));
  // gamma and beta from the file; the running statistics take no part in a
  // training step (batch statistics normalise, and nothing reads them).
  const Op& in = model_.op(x);
  if (in.shape.size() < 2) return false;
  Op op;
  op.kind = OpKind::BatchNorm;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().eps = decimal_eps(attr_float(n, "epsilon", 1e-5f));
  set_params(op, n, {initializer(n, n.input(1), in.shape[1]), initializer(n, n.input(2), in.shape[1])});
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::pool(const NodeProto& n, int x) {
  const std::string& type = n.op_type();
  if (type == "GlobalAveragePool") {
    // PyTorch computes a pool to 1x1 (adaptive_avg_pool2d(1), x.mean((2, 3)))
    // as a mean, whose backward keeps its input in 1.x and nothing in 2.x
    // (onnx_family.cpp's reduce): the rule keeps it; a 2.x export keeps none.
    if (torch_major_ < 2) return add_kind(OpKind::GlobalAvgPool, n, {x}) >= 0;
    Op op;
    op.kind = OpKind::GlobalAvgPool;
    op.name = op_name(n);
    op.inputs = {x};
    return try_add(std::move(op), out0(n), n, true) >= 0;  // op.saved empty
  }
  if (n.output_size() > 1 && !n.output(1).empty() && consumers_.count(n.output(1))) return false;  // indices used
  for (const auto& a : n.attribute())
    if (a.name() == "auto_pad" && a.s() != "NOTSET") return false;
  Op op;
  op.kind = type == "MaxPool" ? OpKind::MaxPool : OpKind::AvgPool;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().kernel = attr_ints(n, "kernel_shape");
  op.attrs.edit().stride = attr_ints(n, "strides");
  if (op.attrs->stride.empty()) op.attrs.edit().stride.assign(op.attrs->kernel.size(), 1);  // ONNX's default, not torch's
  op.attrs.edit().pads = attr_ints(n, "pads");
  if (op.kind == OpKind::MaxPool) op.attrs.edit().dilation = attr_ints(n, "dilations");
  op.attrs.edit().ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  // ONNX's default leaves the padding out of the divisor, PyTorch's counts it;
  // without padding the two divide alike (kept at PyTorch's, as a capture).
  const auto& pads = op.attrs->pads;
  if (op.kind == OpKind::AvgPool && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
    op.attrs.edit().count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::softmax(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const int64_t axis = attr_int(n, "axis", opset_ >= 13 ? -1 : 1);
  // Before opset 13 Softmax flattens to 2-D at `axis`: the same only on the last axis.
  if (opset_ < 13 && axis != -1 && axis != rank - 1) return false;
  Op op;
  op.kind = OpKind::Softmax;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().axis = axis;
  return try_add(std::move(op), out0(n), n) >= 0;
}

// `c` (right-aligned with x) has one dimension above 1, equal to x's there,
// and it is x's last axis or, at rank 3 and more, axis 1.
bool Importer::scale_vector(const std::vector<int64_t>& c, const std::vector<int64_t>& x) {
  if (c.empty() || c.size() > x.size()) return false;
  int at = -1;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i] == 1) continue;
    if (at >= 0) return false;
    at = static_cast<int>(x.size() - c.size() + i);
    if (c[i] != x[static_cast<std::size_t>(at)]) return false;
  }
  return at >= 0 && (at == static_cast<int>(x.size()) - 1 || (at == 1 && x.size() >= 3));
}

bool Importer::with_constant(const NodeProto& n, int x) {
  if (n.input_size() != 2) return false;
  const bool x_first = activation(n.input(0)) == x;
  const std::string& c = x_first ? n.input(1) : n.input(0);
  if (!is_constant(c)) return false;
  const std::string& type = n.op_type();
  // c - x and c / x are not "x by a constant".
  if (!x_first && (type == "Sub" || type == "Div")) return false;
  const auto cs = known_shape(c);
  const auto out = known_shape(out0(n));
  const Op& in = model_.op(x);
  if (!cs || (out && *out != in.shape)) return false;  // a broadcast that grows x
  // x times a vector of the file's initializers along x's features (last
  // axis) or channels (axis 1): a scale PyTorch learns (RMSNorm's weight, a
  // layer scale), left to binary_fn as a learned Pointwise Mul, which keeps x
  // for the scale's gradient. ONNX does not tell parameters from buffers; a
  // constant over more than one axis (rotary embeddings' cos and sin tables)
  // is taken for a buffer, fixed.
  if (type == "Mul" && is_graph_initializer(c) && scale_vector(*cs, in.shape)) return false;
  // The *Const kernels repeat the constant over x's last dimensions; one that
  // broadcasts along an inner axis (x / positions of shape (1, T, 1)) is the
  // family's, which broadcasts as PyTorch does.
  std::size_t lead = 0;
  while (lead < cs->size() && (*cs)[lead] == 1) ++lead;
  const std::size_t rest = cs->size() - lead;
  if (rest > in.shape.size() || !std::equal(cs->begin() + static_cast<std::ptrdiff_t>(lead), cs->end(),
                                            in.shape.end() - static_cast<std::ptrdiff_t>(rest)))
    return false;
  Op op;
  op.kind = type == "Mul" ? OpKind::MulConst : type == "Div" ? OpKind::DivConst : OpKind::AddConst;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().const_shape = *cs;
  // A constant tensor (not a scalar) is a parameter or buffer: baseline.
  uint64_t numel = 1;
  for (int64_t d : *cs) numel *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
  if (numel > 1 && is_initializer(c)) op.param_bytes = numel * dtype_size(in.dtype);
  if (auto v = floats(constant(c))) {
    // x - c is x + (-c).
    if (type == "Sub")
      for (float& f : *v) f = -f;
    op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(std::move(*v))};
  }
  // A tensor initializer added to an activation is a parameter PyTorch
  // learns (a position table: Linear and Conv biases are matched before
  // this); its values are the initial ones. Buffers are multiplied or
  // masked far more than added, and Sub would learn the negation: fixed.
  op.attrs.edit().learned = type == "Add" && numel > 1 && is_initializer(c);
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::masked_fill(const NodeProto& n, int x) {
  if (n.input_size() != 3 || !is_constant(n.input(0))) return false;
  const int on_false = activation(n.input(2)) == x ? 2 : activation(n.input(1)) == x ? 1 : -1;
  if (on_false < 0 || !is_constant(n.input(3 - on_false))) return false;
  const auto mask = known_shape(n.input(0));
  const auto out = known_shape(out0(n));
  if (!mask || (out && *out != model_.op(x).shape)) return false;
  Op op;
  op.kind = OpKind::MaskedFill;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().const_shape = *mask;
  // Where(cond, fill, x) fills where cond holds; Where(cond, x, fill) where it does not.
  if (auto cond = floats(constant(n.input(0)))) {
    for (float& f : *cond) f = (f != 0.0f) == (on_false == 2) ? 1.0f : 0.0f;
    op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(std::move(*cond))};
  }
  if (auto fill = scalar(n.input(3 - on_false))) op.attrs.edit().fill = *fill;
  else op.attrs.edit().values = {};  // a fill that is not one known number: simulate only
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::embedding(const NodeProto& n, int ids) {
  if (n.input_size() != 2 || activation(n.input(1)) != ids || attr_int(n, "axis", 0) != 0) return false;
  const auto table = known_shape(n.input(0));
  if (!table || table->size() != 2 || !is_constant(n.input(0)) || !is_integer(model_.op(ids).dtype)) return false;
  Op op;
  op.kind = OpKind::Embedding;
  op.name = op_name(n);
  op.inputs = {ids};
  op.attrs.edit().vocab = (*table)[0];
  op.shape = model_.op(ids).shape;
  op.shape.push_back((*table)[1]);
  if (auto et = elem_types_.find(n.input(0)); et != elem_types_.end()) dtype_of(et->second, op.dtype);
  if (op.dtype == DType::F32) set_params(op, n, {initializer(n, n.input(0), (*table)[0] * (*table)[1])});
  return try_add(std::move(op), out0(n), n) >= 0;
}

// torch exports nn.SiLU as Mul(x, Sigmoid(x)).
bool Importer::silu(const NodeProto& sigmoid, int x) {
  const int mul = sole_consumer(out0(sigmoid), "Mul");
  if (mul < 0) return false;
  const std::string* other_in = other(g_.node(mul), out0(sigmoid));
  if (!other_in || activation(*other_in) != x) return false;
  done_.insert(mul);
  Op op;
  op.kind = OpKind::SiLU;
  op.name = pattern_name(sigmoid, "SiLU");
  op.inputs = {x};
  add_op(std::move(op), out0(g_.node(mul)), where(sigmoid));
  return true;
}

bool Importer::view(const NodeProto& n, int x) {
  const std::string& type = n.op_type();
  const Op& in = model_.op(x);
  if (type == "Transpose") {
    Op op;
    op.kind = OpKind::Transpose;
    op.name = op_name(n);
    op.inputs = {x};
    op.attrs.edit().perm = attr_ints(n, "perm");
    return try_add(std::move(op), out0(n), n) >= 0;
  }
  if (type == "Reshape" || type == "Flatten" || type == "Squeeze" || type == "Unsqueeze" || type == "Expand") {
    auto out = known_shape(out0(n));
    if ((!out || out->empty()) && type == "Reshape") out = reshape_target(n, in);
    // Shapes inference left unknown (after a TopK whose k it cannot see):
    // an Unsqueeze's from its constant axes, an Expand's by broadcasting its
    // constant target (a TopK's indices unsqueezed and expanded to a gather).
    if ((!out || out->empty()) && type == "Unsqueeze") {
      std::vector<int64_t> axes = attr_ints(n, "axes");
      if (n.input_size() > 1)
        if (auto d = dense_now(n.input(1)))
          for (const double v : d->v) axes.push_back(static_cast<int64_t>(v));
      const auto rank = static_cast<int64_t>(in.shape.size() + axes.size());
      std::vector<int64_t> shape(static_cast<std::size_t>(rank), 0);
      bool ok = !axes.empty();
      for (int64_t& a : axes) {
        if (a < -rank || a >= rank) ok = false;
        else shape[static_cast<std::size_t>(a < 0 ? a + rank : a)] = 1;
      }
      std::size_t k = 0;
      for (int64_t& d : shape)
        if (d == 0) d = k < in.shape.size() ? in.shape[k++] : 0;
      if (ok && k == in.shape.size()) out = shape;
    }
    if ((!out || out->empty()) && type == "Expand" && n.input_size() == 2) {
      if (auto d = dense_now(n.input(1))) {
        const std::size_t r = std::max(d->v.size(), in.shape.size());
        std::vector<int64_t> shape(r, 1);
        bool ok = true;
        for (std::size_t i = 0; i < r; ++i) {
          const int64_t a = i + in.shape.size() >= r ? in.shape[i + in.shape.size() - r] : 1;
          const int64_t b = i + d->v.size() >= r ? static_cast<int64_t>(d->v[i + d->v.size() - r]) : 1;
          if (a != b && a != 1 && b != 1) ok = false;
          shape[i] = std::max(a, b);
        }
        if (ok) out = shape;
      }
    }
    // A Flatten after an op whose output shape inference could not follow (a
    // Resize by scales held in a Constant node): its two dimensions from the input's.
    if ((!out || out->empty()) && type == "Flatten" && !in.shape.empty()) {
      const auto rank = static_cast<int64_t>(in.shape.size());
      int64_t axis = attr_int(n, "axis", 1);
      if (axis < 0) axis += rank;
      if (axis >= 0 && axis <= rank) {
        const auto cut = in.shape.begin() + static_cast<std::ptrdiff_t>(axis);
        out = std::vector<int64_t>{std::accumulate(in.shape.begin(), cut, int64_t{1}, std::multiplies<>()),
                                   std::accumulate(cut, in.shape.end(), int64_t{1}, std::multiplies<>())};
      }
    }
    if (!out || out->empty()) return false;
    if (*out == in.shape) {
      alias(n, x);
      return true;
    }
    return add_kind(type == "Expand" ? OpKind::Expand : OpKind::Reshape, n, {x}, *out) >= 0;
  }
  if (type == "Slice") {
    // Opset 10+: starts, ends, [axes, [steps]] as constant inputs; one view per axis.
    if (n.input_size() < 3) return false;
    auto starts = ints(constant(n.input(1)));
    auto ends = ints(constant(n.input(2)));
    std::optional<std::vector<int64_t>> axes, steps;
    if (n.input_size() > 3 && !n.input(3).empty()) axes = ints(constant(n.input(3)));
    if (n.input_size() > 4 && !n.input(4).empty()) steps = ints(constant(n.input(4)));
    if (!starts || !ends || starts->size() != ends->size() || starts->empty()) return false;
    if (!axes) {
      axes.emplace();
      for (std::size_t k = 0; k < starts->size(); ++k) axes->push_back(static_cast<int64_t>(k));
    }
    if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
    if (axes->size() != starts->size() || steps->size() != starts->size()) return false;
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    for (std::size_t k = 0; k < starts->size(); ++k) {
      const int64_t a = (*axes)[k];
      if (a < -rank || a >= rank || (*steps)[k] <= 0) return false;  // negative steps: Generic
    }
    int y = x;
    for (std::size_t k = 0; k < starts->size(); ++k) {
      Op op;
      op.kind = OpKind::Slice;
      op.name = op_name(n) + (starts->size() > 1 ? "." + std::to_string(k) : "");
      op.inputs = {y};
      op.attrs.edit().axis = (*axes)[k];
      op.attrs.edit().start = (*starts)[k];
      op.attrs.edit().end = std::clamp<int64_t>((*ends)[k], -(int64_t{1} << 40), int64_t{1} << 40);  // INT64_MAX: to the end
      op.attrs.edit().start = std::clamp<int64_t>(op.attrs->start, -(int64_t{1} << 40), int64_t{1} << 40);
      op.attrs.edit().step = (*steps)[k];
      const int next = try_add(std::move(op), out0(n), n);
      if (next < 0) {
        if (y != x) fail_node(origin_, n, "a slice of axis " + std::to_string((*axes)[k]) + " is empty or out of range");
        return false;
      }
      y = next;
    }
    return true;
  }
  return false;
}

bool Importer::concat(const NodeProto& n, const std::vector<std::string>& acts) {
  Op op;
  op.kind = OpKind::Concat;
  op.name = op_name(n);
  op.attrs.edit().axis = attr_int(n, "axis", 0);
  for (int k = 0; k < n.input_size(); ++k) {
    const std::string& in = n.input(k);
    if (const int a = activation(in); a >= 0) {
      op.inputs.push_back(a);
      continue;
    }
    // A constant piece: one, an initializer broadcast (a class token).
    auto origin = param_origin_.find(in);
    const auto d = known_shape(in);
    if (op.attrs->const_at >= 0 || origin == param_origin_.end() || !d) return false;
    std::vector<int64_t> shape = origin->second.shape;
    if (shape.size() > d->size()) return false;
    shape.insert(shape.begin(), d->size() - shape.size(), 1);
    const auto rank = static_cast<int64_t>(d->size());
    const int64_t ax = op.attrs->axis < 0 ? op.attrs->axis + rank : op.attrs->axis;
    if (ax < 0 || ax >= rank || shape[static_cast<std::size_t>(ax)] != (*d)[static_cast<std::size_t>(ax)]) return false;
    auto values = floats(constant(origin->second.init));
    if (!values || !is_initializer(origin->second.init)) return false;
    op.attrs.edit().const_at = static_cast<int64_t>(op.inputs.size());
    op.attrs.edit().const_shape = shape;
    op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(std::move(*values))};
    op.attrs.edit().learned = true;
  }
  if (op.inputs.empty() || op.inputs.size() != acts.size()) return false;
  return try_add(std::move(op), out0(n), n) >= 0;
}

// x[:, i]: a Slice of one index along the axis (a view) and a Reshape that
// drops that axis (a view of it), as PyTorch's select is a view.
bool Importer::select(const NodeProto& n, int x) {
  if (n.input_size() != 2 || activation(n.input(0)) != x) return false;
  const auto idx = ints(constant(n.input(1)));
  const TensorProto* it = constant(n.input(1));
  if (!idx || idx->size() != 1 || !it || it->dims_size() != 0) return false;  // index_select: not a view
  const Op& in = model_.op(x);
  const auto rank = static_cast<int64_t>(in.shape.size());
  int64_t ax = attr_int(n, "axis", 0);
  if (ax < 0) ax += rank;
  if (ax < 0 || ax >= rank || rank < 2) return false;
  int64_t i = (*idx)[0];
  if (i < 0) i += in.shape[static_cast<std::size_t>(ax)];
  if (i < 0 || i >= in.shape[static_cast<std::size_t>(ax)]) return false;
  std::vector<int64_t> shape(in.shape.begin(), in.shape.end());
  shape.erase(shape.begin() + ax);
  Op s;
  s.kind = OpKind::Slice;
  s.name = op_name(n) + ".slice";
  s.inputs = {x};
  s.attrs.edit().axis = ax;
  s.attrs.edit().start = i;
  s.attrs.edit().end = i + 1;
  const int sl = try_add(std::move(s), out0(n), n);
  if (sl < 0) return false;
  Op r;
  r.kind = OpKind::Reshape;
  r.name = op_name(n);
  r.inputs = {sl};
  r.shape = std::move(shape);
  add_op(std::move(r), out0(n), where(n));
  return true;
}

// A Reshape's output shape from its folded target (0 copies the input's
// dimension, -1 takes the rest), when shape inference gave none.
std::optional<std::vector<int64_t>> Importer::reshape_target(const NodeProto& n, const Op& in) const {
  if (n.input_size() < 2) return std::nullopt;
  auto target = ints(constant(n.input(1)));
  if (!target || target->empty() || target->size() > 8) return std::nullopt;
  std::vector<int64_t> out = *target;
  int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0 && attr_int(n, "allowzero", 0) == 0) {
      if (k >= in.shape.size()) return std::nullopt;
      out[k] = in.shape[k];
    }
    if (out[k] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(k);
    } else if (out[k] <= 0 || out[k] > (int64_t{1} << 40)) {
      return std::nullopt;
    } else {
      known *= out[k];
      if (known > in.numel()) return std::nullopt;
    }
  }
  if (infer >= 0) {
    if (in.numel() % known) return std::nullopt;
    out[static_cast<std::size_t>(infer)] = in.numel() / known;
  }
  return out;
}

bool Importer::split(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  const int64_t axis = attr_int(n, "axis", 0);
  if (axis < -static_cast<int64_t>(in.shape.size()) || axis >= static_cast<int64_t>(in.shape.size())) return false;
  const auto ax = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int64_t>(in.shape.size()) : axis);
  // Sizes from the inferred outputs (the split input or attribute says the same).
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const auto& o : n.output()) {
    auto s = known_shape(o);
    if (!s || s->size() != in.shape.size() || (*s)[ax] <= 0) return false;
    sizes.push_back((*s)[ax]);
    total += (*s)[ax];
  }
  if (total != in.shape[ax]) return false;
  int64_t start = 0;
  for (int k = 0; k < n.output_size(); ++k) {
    Op op;
    op.kind = OpKind::Slice;
    op.name = op_name(n) + "." + std::to_string(k);
    op.inputs = {x};
    op.attrs.edit().axis = axis;
    op.attrs.edit().start = start;
    op.attrs.edit().end = start + sizes[static_cast<std::size_t>(k)];
    start = op.attrs->end;
    add_op(std::move(op), n.output(k), where(n));  // checked above: cannot fail
  }
  return true;
}

// torch.topk as remat_capture writes it: the indices a TopK op, the values a
// Gather of x by them (whose rule keeps x and the indices; topk's node keeps
// the indices alone, and x is most often kept anyway: a softmax's output).
bool Importer::topk(const NodeProto& n, int x) {
  if (n.input_size() != 2 || n.output_size() != 2) return false;
  if (attr_int(n, "largest", 1) != 1 || attr_int(n, "sorted", 1) != 1) return false;
  const auto k = dense_now(n.input(1));
  if (!k || k->v.size() != 1 || k->v[0] < 1) return false;
  const int64_t axis = attr_int(n, "axis", -1);
  Op t;
  t.kind = OpKind::TopK;
  t.name = op_name(n) + ".indices";
  t.inputs = {x};
  t.attrs.edit().axis = axis;
  t.attrs.edit().k = static_cast<int64_t>(k->v[0]);
  const int idx = try_add(std::move(t), n.output(1), n);
  if (idx < 0) return false;
  if (!consumers_.count(n.output(0))) return true;  // the indices alone are read
  Op g;
  g.kind = OpKind::Gather;
  g.name = op_name(n);
  g.inputs = {x, idx};
  g.attrs.edit().axis = axis;
  add_op(std::move(g), n.output(0), where(n));  // the TopK's shape and dtype make it valid
  return true;
}

void Importer::eval_mode_note() {
  const std::string how = "re-export with torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING, "
                          "do_constant_folding=False) for the memory of training";
  if (!eval_mode_.empty()) {
    std::string list;
    for (std::size_t k = 0; k < eval_mode_.size() && k < 5; ++k) list += (k ? ", " : "") + eval_mode_[k];
    if (eval_mode_.size() > 5) list += ", ... (" + std::to_string(eval_mode_.size() - 5) + " more)";
    warn("exported in inference (eval) mode: " + list +
         " (inference-mode Dropout is the identity here, and batch norms use their running statistics); " + how);
    return;
  }
  // torch folds batch norms into the convolutions of an eval-mode export: the
  // folded weights are new constants the exporter names "onnx::Conv_...".
  if (has_batchnorm_) return;
  for (const auto& node : g_.node()) {
    if (node.op_type() == "Conv" && node.input_size() > 1 && node.input(1).rfind("onnx::", 0) == 0) {
      warn("no BatchNormalization but convolution weights made by the exporter ('" + node.input(1) +
           "'): this looks like an eval-mode export that folded batch norms into the convolutions and dropped "
           "dropout, so their memory is missing; " + how);
      return;
    }
  }
}

}  // namespace remat::onnx_import
#endif
