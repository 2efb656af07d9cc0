// The ONNX forms of the pointwise family and of the reductions
// (core/kernels/pointwise_fns.h): what torch.onnx.export writes for ReLU6
// (Clip), hardswish, x.mean(dims), a product of two activations (squeeze-and-
// excitation, SwiGLU) and the like become Pointwise and Reduce ops, which run,
// instead of simulate-only Generic ones. Each returns false (the node becomes
// Generic) when the node is not a form the family computes exactly.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/io/onnx_importer.h"
#include "core/kernels/pointwise_fns.h"

namespace remat::onnx_import {

namespace {

Op family_op(OpKind k, pw::Fn fn, const std::string& name) {
  Op op;
  op.kind = k;
  op.name = name;
  op.attrs.edit().fn = static_cast<uint8_t>(fn);
  pw::attr_defaults(fn, op.attrs.edit().alpha, op.attrs.edit().beta);
  return op;
}

}  // namespace

// torch exports hardtanh and ReLU6 as Clip: bounds are inputs from opset 11,
// attributes before. Both are torch's clamp forward; the backward differs
// only on an element exactly at a bound (hardtanh passes no gradient there,
// clamp does), which the reference runs as clamp too.
bool Importer::clip(const NodeProto& n, int x) {
  Op op = family_op(OpKind::Pointwise, pw::Fn::Clamp, op_name(n));
  op.inputs = {x};
  if (opset_ >= 11) {
    for (int k = 1; k <= 2; ++k) {
      if (n.input_size() <= k || n.input(k).empty()) continue;
      const auto v = scalar(n.input(k));
      if (!v) return false;  // a bound computed from activations, or unknown
      (k == 1 ? op.attrs.edit().alpha : op.attrs.edit().beta) = *v;
    }
  } else {
    op.attrs.edit().alpha = attr_float(n, "min", -INFINITY);
    op.attrs.edit().beta = attr_float(n, "max", INFINITY);
  }
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::unary_fn(const NodeProto& n, int x) {
  struct Map {
    const char* onnx;
    pw::Fn fn;
  };
  static constexpr Map kUnary[] = {
      {"Neg", pw::Fn::Neg},         {"Exp", pw::Fn::Exp},        {"Log", pw::Fn::Log},
      {"Sqrt", pw::Fn::Sqrt},       {"Reciprocal", pw::Fn::Reciprocal}, {"Abs", pw::Fn::Abs},
      {"Sin", pw::Fn::Sin},         {"Cos", pw::Fn::Cos},        {"Erf", pw::Fn::Erf},
      {"HardSwish", pw::Fn::Hardswish}, {"HardSigmoid", pw::Fn::Hardsigmoid}, {"LeakyRelu", pw::Fn::LeakyReLU},
      {"Elu", pw::Fn::ELU},         {"Softplus", pw::Fn::Softplus}, {"Mish", pw::Fn::Mish},
  };
  const Map* m = std::find_if(std::begin(kUnary), std::end(kUnary), [&](const Map& e) { return n.op_type() == e.onnx; });
  if (m == std::end(kUnary)) return false;
  Op op = family_op(OpKind::Pointwise, m->fn, op_name(n));
  op.inputs = {x};
  // ONNX's HardSigmoid is max(0, min(1, alpha·x + beta)); torch's is alpha 1/6, beta 1/2.
  if (m->fn == pw::Fn::Hardsigmoid &&
      (std::fabs(attr_float(n, "alpha", 0.2f) - 1.0f / 6.0f) > 1e-7f || attr_float(n, "beta", 0.5f) != 0.5f))
    return false;
  if (m->fn == pw::Fn::LeakyReLU) op.attrs.edit().alpha = attr_float(n, "alpha", 0.01f);
  if (m->fn == pw::Fn::ELU) op.attrs.edit().alpha = attr_float(n, "alpha", 1.0f);
  return try_add(std::move(op), out0(n), n) >= 0;
}

// Axes are an attribute (ReduceSum before opset 13, the others before 18) or
// the second input; none reduces everything unless noop_with_empty_axes.
bool Importer::reduce(const NodeProto& n, int x) {
  const std::string& type = n.op_type();
  const pw::ReduceFn fn = type == "ReduceSum" ? pw::ReduceFn::Sum : type == "ReduceMean" ? pw::ReduceFn::Mean : pw::ReduceFn::Amax;
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (n.input_size() > 1 && !n.input(1).empty()) {
    const auto v = ints(constant(n.input(1)));
    if (!v) return false;
    axes = *v;
  }
  if (axes.empty() && attr_int(n, "noop_with_empty_axes", 0) != 0) return false;
  Op op;
  op.kind = OpKind::Reduce;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().fn = static_cast<uint8_t>(fn);
  op.attrs.edit().axes = axes;
  op.attrs.edit().keepdim = attr_int(n, "keepdims", 1) != 0;
  // PyTorch 1.x's mean over dims keeps its input for the backward (its
  // formula reads self.sizes() through self); 2.x's keeps only the sizes, as
  // the Reduce rule does. The file names the PyTorch that exported it.
  if (fn == pw::ReduceFn::Mean && torch_major_ == 1) {
    op.saved = {x};
    return try_add(std::move(op), out0(n), n, true) >= 0;
  }
  return try_add(std::move(op), out0(n), n) >= 0;
}

bool Importer::binary_fn(const NodeProto& n, const std::vector<std::string>& acts) {
  const std::string& type = n.op_type();
  const pw::Fn fn = type == "Add" ? pw::Fn::Add : type == "Sub" ? pw::Fn::Sub : type == "Mul" ? pw::Fn::Mul
                  : type == "Div" ? pw::Fn::Div : type == "Pow" ? pw::Fn::Pow : type == "Max" ? pw::Fn::Maximum
                  : type == "Min" ? pw::Fn::Minimum : pw::Fn::Neg;
  if (fn == pw::Fn::Neg || n.input_size() != 2 || acts.empty()) return false;
  // Integer arithmetic (indices) is not the family's float math.
  for (const auto& in : n.input())
    if (auto et = elem_types_.find(in); et != elem_types_.end() && et->second != TensorProto::FLOAT) return false;
  Op op = family_op(OpKind::Pointwise, fn, op_name(n));
  for (const auto& a : acts) op.inputs.push_back(activation(a));
  if (acts.size() == 1) {
    const int at = is_constant(n.input(0)) ? 0 : 1;
    const std::string& c = n.input(at);
    const auto cs = known_shape(c);
    if (!cs) return false;
    op.attrs.edit().const_at = at;
    op.attrs.edit().const_shape = *cs;
    uint64_t numel = 1;
    for (int64_t d : *cs) numel *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
    // A tensor of the file's initializers is a parameter PyTorch trains (a
    // layer scale); scalars and computed constants are fixed.
    op.attrs.edit().learned = numel > 1 && is_graph_initializer(c) && fn != pw::Fn::Pow;
    if (auto v = floats(constant(c))) op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(std::move(*v))};
  }
  return try_add(std::move(op), out0(n), n) >= 0;
}

}  // namespace remat::onnx_import
#endif
