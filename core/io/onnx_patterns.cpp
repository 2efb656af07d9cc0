// Matchers of what torch.onnx.export decomposes, back into one op each (see
// docs/model-format.md): Gemm and MatMul[+Add] -> Linear with its weights,
// Div/Erf/Add/Mul/Mul -> GELU, LayerNormalization and its ReduceMean/.../Add
// form -> LayerNorm, Reshape/InstanceNormalization/Reshape[/Mul/Add] ->
// GroupNorm. Each returns false (the node becomes Generic) when the
// pattern does not hold exactly.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <cmath>

#include "core/io/onnx_importer.h"

namespace remat::onnx_import {

// The only live consumer of `tensor`, if it has exactly one and it is of `type`.
int Importer::sole_consumer(const std::string& tensor, const char* type) const {
  auto it = consumers_.find(tensor);
  if (it == consumers_.end() || it->second.size() != 1) return -1;
  const int c = it->second[0];
  return g_.node(c).op_type() == type && !done_.count(c) ? c : -1;
}

bool Importer::last_axis_only(const NodeProto& n, std::size_t rank) const {
  const auto axes = attr_ints(n, "axes");
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == static_cast<int64_t>(rank) - 1);
}

// A matched pattern is named after its scope: "/ln/ReduceMean" -> "/ln/LayerNorm".
std::string Importer::pattern_name(const NodeProto& first, const char* kind) const {
  const std::string n = op_name(first);
  const auto slash = n.rfind('/');
  return slash == std::string::npos ? n + "." + kind : n.substr(0, slash + 1) + kind;
}

// Linear y = x W^T + b, W (out, in) as the kernels take it.
int Importer::add_linear(const NodeProto& n, const std::string& output, int x, std::vector<float> w_out_in, int64_t out, std::vector<float> bias) {
  const Op& in = model_.op(x);
  Op op;
  op.kind = OpKind::Linear;
  op.name = op_name(n);
  op.inputs = {x};
  op.shape = in.shape;
  op.shape.back() = out;
  // No bias in the file (torch's Linear(bias=False): GPT-2's head) means no
  // bias parameter: a zero one would still learn, and take bytes and a gradient.
  if (bias.empty()) {
    op.attrs.edit().bias = false;
    op.param_init = {std::make_shared<const std::vector<float>>(std::move(w_out_in))};
  } else {
    op.param_init = {std::make_shared<const std::vector<float>>(std::move(w_out_in)),
                     std::make_shared<const std::vector<float>>(std::move(bias))};
  }
  return add_op(std::move(op), output, where(n));
}

// A constant weight of shape (rows, cols), transposed into (out, in) when
// `in_out` (MatMul's and Gemm transB=0's layout).
std::optional<std::vector<float>> Importer::weight(const NodeProto& n, const std::string& name, int64_t in_features, bool in_out, int64_t& out) {
  const TensorProto* t = constant(name);
  if (!t) return std::nullopt;
  const auto d = dims(t);
  if (d.size() != 2) return std::nullopt;
  const int64_t k = in_out ? d[0] : d[1];
  out = in_out ? d[1] : d[0];
  if (k != in_features)
    fail_node(origin_, n, "weight '" + name + "' is " + shape_str(d) + " but the input has " +
                              std::to_string(in_features) + " features");
  auto v = floats(t);
  if (!v) {
    if (t->data_location() == TensorProto::EXTERNAL) fail_node(origin_, n, "weight '" + name + "' is stored in an external file; export with the weights inside the .onnx");
    fail_node(origin_, n, "weight '" + name + "' is not a float tensor of " + shape_str(d) + " (size mismatch or type)");
  }
  if (!in_out) return v;
  std::vector<float> tr(v->size());
  for (int64_t r = 0; r < d[0]; ++r) {
    for (int64_t c = 0; c < d[1]; ++c) tr[static_cast<std::size_t>(c * d[0] + r)] = (*v)[static_cast<std::size_t>(r * d[1] + c)];
  }
  return tr;
}

std::shared_ptr<const std::vector<float>> Importer::initializer(const NodeProto& n, const std::string& name, int64_t numel) const {
  const TensorProto* t = constant(name);
  // Computed from constants in a way not evaluated here, or half precision
  // (a model the kernels do not run anyway).
  if (!t || t->data_type() == TensorProto::FLOAT16 || t->data_type() == TensorProto::BFLOAT16) return nullptr;
  auto v = floats(t);
  if (!v) {
    if (t->data_location() == TensorProto::EXTERNAL)
      fail_node(origin_, n, "'" + name + "' is stored in an external file; export with the weights inside the .onnx");
    fail_node(origin_, n, "'" + name + "' is not a float tensor of " + shape_str(dims(t)) + " (size mismatch or type)");
  }
  if (numel >= 0 && static_cast<int64_t>(v->size()) != numel)
    fail_node(origin_, n, "'" + name + "' has " + std::to_string(v->size()) + " values, " + std::to_string(numel) + " expected");
  return std::make_shared<const std::vector<float>>(std::move(*v));
}

void Importer::set_params(Op& op, const NodeProto& n, std::vector<std::shared_ptr<const std::vector<float>>> init) {
  for (const auto& p : init) {
    if (p) continue;
    op.simulate_only = true;
    warn(where(n) + ": the values of a weight are not known here (computed in the graph, or not float32): simulate only");
    return;
  }
  op.param_init = std::move(init);
}

std::optional<std::vector<float>> Importer::bias_of(const std::string& name, int64_t out) const {
  const TensorProto* t = constant(name);
  auto v = floats(t);
  if (!v) return std::nullopt;
  if (static_cast<int64_t>(v->size()) == out) return v;
  if (v->size() == 1) return std::vector<float>(static_cast<std::size_t>(out), (*v)[0]);
  return std::nullopt;
}

bool Importer::gemm(const NodeProto& n, int x) {
  if (n.input_size() < 2 || n.input(0).empty() || activation(n.input(0)) != x) return false;
  if (attr_int(n, "transA", 0) != 0 || attr_float(n, "alpha", 1.0f) != 1.0f || attr_float(n, "beta", 1.0f) != 1.0f)
    return false;
  const Op& in = model_.op(x);
  if (in.shape.size() != 2) return false;
  int64_t out = 0;
  auto w = weight(n, n.input(1), in.cols(), attr_int(n, "transB", 0) == 0, out);
  if (!w) return false;
  std::vector<float> b;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    auto bv = bias_of(n.input(2), out);
    if (!bv) return false;
    b = std::move(*bv);
  }
  add_linear(n, out0(n), x, std::move(*w), out, std::move(b));
  return true;
}

// MatMul(x, W) [+ Add(b)]: torch's Linear on inputs of rank > 2.
bool Importer::matmul(const NodeProto& n, int x) {
  if (n.input_size() != 2 || activation(n.input(0)) != x || !constant(n.input(1))) return false;
  int64_t out = 0;
  auto w = weight(n, n.input(1), model_.op(x).cols(), true, out);
  if (!w) return false;
  std::string output = out0(n);
  std::vector<float> b;
  const int add = sole_consumer(output, "Add");
  if (add >= 0) {
    const std::string* bname = other(g_.node(add), output);
    if (bname && constant(*bname)) {
      if (auto bv = bias_of(*bname, out)) {
        b = std::move(*bv);
        done_.insert(add);
        output = out0(g_.node(add));
      }
    }
  }
  add_linear(n, output, x, std::move(*w), out, std::move(b));
  return true;
}

// torch's exact GELU before opset 20: Div(x, √2) → Erf → Add(1) → Mul(x) → Mul(0.5).
bool Importer::gelu_erf(const NodeProto& div, int x) {
  const std::string& xs = div.input(0);
  if (div.input_size() != 2 || activation(xs) != x || !scalar_is(div.input(1), 1.41421356f)) return false;
  const int erf = sole_consumer(out0(div), "Erf");
  if (erf < 0) return false;
  const int add = sole_consumer(out0(g_.node(erf)), "Add");
  if (add < 0) return false;
  const std::string* one = other(g_.node(add), out0(g_.node(erf)));
  if (!one || !scalar_is(*one, 1.0f)) return false;
  const int mul1 = sole_consumer(out0(g_.node(add)), "Mul");
  if (mul1 < 0) return false;
  const std::string* xx = other(g_.node(mul1), out0(g_.node(add)));
  if (!xx || *xx != xs) return false;
  const int mul2 = sole_consumer(out0(g_.node(mul1)), "Mul");
  if (mul2 < 0) return false;
  const std::string* half = other(g_.node(mul2), out0(g_.node(mul1)));
  if (!half || !scalar_is(*half, 0.5f)) return false;
  for (int k : {erf, add, mul1, mul2}) done_.insert(k);
  Op op;
  op.kind = OpKind::GELU;
  op.name = pattern_name(div, "GELU");
  op.inputs = {x};
  add_op(std::move(op), out0(g_.node(mul2)), where(div));
  return true;
}

int Importer::add_layernorm(const NodeProto& n, const std::string& name, const std::string& output, int x, std::optional<std::vector<float>> gamma, std::optional<std::vector<float>> beta, float eps) {
  const Op& in = model_.op(x);
  const auto d = static_cast<std::size_t>(in.cols());
  if (!gamma) gamma = std::vector<float>(d, 1.0f);
  if (!beta) beta = std::vector<float>(d, 0.0f);
  Op op;
  op.kind = OpKind::LayerNorm;
  op.name = name;
  op.inputs = {x};
  op.attrs.edit().eps = decimal_eps(eps);
  op.param_init = {std::make_shared<const std::vector<float>>(std::move(*gamma)),
                   std::make_shared<const std::vector<float>>(std::move(*beta))};
  return add_op(std::move(op), output, where(n));
}

std::optional<std::vector<float>> Importer::vector_of(const std::string& name, int64_t d) const {
  auto v = floats(constant(name));
  if (!v || static_cast<int64_t>(v->size()) != d) return std::nullopt;
  return v;
}

bool Importer::layernorm(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  const int64_t axis = attr_int(n, "axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(in.shape.size()) - 1) return false;
  if (n.input_size() < 2) return false;
  auto gamma = vector_of(n.input(1), in.cols());
  if (!gamma) return false;
  std::optional<std::vector<float>> beta;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    beta = vector_of(n.input(2), in.cols());
    if (!beta) return false;
  }
  add_layernorm(n, op_name(n), out0(n), x, std::move(gamma), std::move(beta), attr_float(n, "epsilon", 1e-5f));
  return true;
}

// torch's LayerNorm before opset 17: ReduceMean → Sub → Pow(2) → ReduceMean →
// Add(eps) → Sqrt → Div, then optional Mul(gamma), Add(beta).
bool Importer::layernorm_decomposed(const NodeProto& mean, int x) {
  const Op& in = model_.op(x);
  const std::string& xs = mean.input(0);
  if (!last_axis_only(mean, in.shape.size())) return false;
  auto cons = consumers_.find(out0(mean));
  if (cons == consumers_.end() || cons->second.size() != 1) return false;
  const NodeProto& sub = g_.node(cons->second[0]);
  if (sub.op_type() != "Sub" || sub.input_size() != 2 || sub.input(0) != xs || sub.input(1) != out0(mean)) return false;
  const std::string& num = out0(sub);
  auto nc = consumers_.find(num);
  if (nc == consumers_.end() || nc->second.size() != 2) return false;
  int pow = -1, div = -1;
  for (int c : nc->second) {
    if (g_.node(c).op_type() == "Pow") pow = c;
    if (g_.node(c).op_type() == "Div") div = c;
  }
  if (pow < 0 || div < 0 || g_.node(pow).input(0) != num || g_.node(pow).input_size() != 2 ||
      !scalar_is(g_.node(pow).input(1), 2.0f))
    return false;
  const int var = sole_consumer(out0(g_.node(pow)), "ReduceMean");
  if (var < 0 || !last_axis_only(g_.node(var), in.shape.size())) return false;
  const int add = sole_consumer(out0(g_.node(var)), "Add");
  if (add < 0) return false;
  const std::string* eps_name = other(g_.node(add), out0(g_.node(var)));
  const auto eps = eps_name ? scalar(*eps_name) : std::nullopt;
  if (!eps) return false;
  const int sqrt = sole_consumer(out0(g_.node(add)), "Sqrt");
  if (sqrt < 0) return false;
  const NodeProto& dn = g_.node(div);
  if (dn.input_size() != 2 || dn.input(0) != num || dn.input(1) != out0(g_.node(sqrt))) return false;
  std::vector<int> used = {cons->second[0], pow, var, add, sqrt, div};
  std::string output = out0(dn);
  std::optional<std::vector<float>> gamma, beta;
  if (const int mul = sole_consumer(output, "Mul"); mul >= 0) {
    const std::string* w = other(g_.node(mul), output);
    if (w && (gamma = vector_of(*w, in.cols()))) {
      used.push_back(mul);
      output = out0(g_.node(mul));
    }
  }
  if (const int badd = sole_consumer(output, "Add"); badd >= 0) {
    const std::string* b = other(g_.node(badd), output);
    if (b && (beta = vector_of(*b, in.cols()))) {
      used.push_back(badd);
      output = out0(g_.node(badd));
    }
  }
  for (int k : used) done_.insert(k);
  add_layernorm(mean, pattern_name(mean, "LayerNorm"), output, x, std::move(gamma), std::move(beta), *eps);
  return true;
}

std::optional<Importer::Dense> Importer::dense_now(const std::string& name, int depth) {
  if (auto d = dense(name)) return d;
  auto it = producer_.find(name);
  if (depth > 8 || it == producer_.end() || done_.count(it->second)) return std::nullopt;
  const NodeProto& p = g_.node(it->second);
  for (const auto& in : p.input())
    if (!in.empty() && !dense_now(in, depth + 1)) return std::nullopt;
  if (!fold_constant(p)) return std::nullopt;
  done_.insert(it->second);
  return dense(name);
}

// torch's GroupNorm (symbolic_opset9's group_norm): x (N, C, ...) reshaped to
// (N, G, -1), InstanceNormalization over it with scale 1 and bias 0 per group
// and the model's epsilon, reshaped back to x's shape, then Mul(γ as
// (C, 1, ...)) and Add(β as (C, 1, ...)) for an affine one. One GroupNorm
// with the file's γ, β and epsilon; without the Mul and Add, affine false.
bool Importer::groupnorm(const NodeProto& r1, int x) {
  const Op& in = model_.op(x);
  if (in.shape.size() < 3 || r1.input_size() != 2) return false;
  const int inorm = sole_consumer(out0(r1), "InstanceNormalization");
  if (inorm < 0) return false;
  const auto target = dense_now(r1.input(1));
  const int64_t n = in.shape[0], c = in.shape[1];
  // (0 or N, G, -1): a 0 copies the input's dimension (allowzero 0, torch's).
  if (!target || target->v.size() != 3 || (target->v[0] != 0 && static_cast<int64_t>(target->v[0]) != n) ||
      attr_int(r1, "allowzero", 0) != 0)
    return false;
  const auto groups = static_cast<int64_t>(target->v[1]);
  if (groups <= 0 || c % groups != 0) return false;
  const NodeProto& inn = g_.node(inorm);
  if (inn.input_size() != 3) return false;
  const auto scale = dense_now(inn.input(1)), shift = dense_now(inn.input(2));
  const auto all = [groups](const std::optional<Dense>& d, double v) {
    return d && static_cast<int64_t>(d->v.size()) == groups &&
           std::all_of(d->v.begin(), d->v.end(), [v](double e) { return e == v; });
  };
  if (!all(scale, 1.0) || !all(shift, 0.0)) return false;
  const int r2 = sole_consumer(out0(inn), "Reshape");
  if (r2 < 0) return false;
  // Back to x's shape: the inferred one, or a target that is Shape(x) (torch's).
  const std::vector<int64_t> xs(in.shape.begin(), in.shape.end());
  const NodeProto& rn = g_.node(r2);
  const auto back = known_shape(out0(rn));
  const auto src = rn.input_size() == 2 ? producer_.find(rn.input(1)) : producer_.end();
  const bool shape_of_x = src != producer_.end() && g_.node(src->second).op_type() == "Shape" &&
                          g_.node(src->second).input_size() == 1 && g_.node(src->second).input(0) == r1.input(0) &&
                          attr_int(g_.node(src->second), "start", 0) == 0 && attr_int(g_.node(src->second), "end", INT64_MAX) == INT64_MAX;
  if (!(back && *back == xs) && !shape_of_x) return false;
  std::vector<int> used = {inorm, r2};
  std::string output = out0(g_.node(r2));
  // γ and β as (C, 1, ...): C values.
  std::optional<std::vector<float>> gamma, beta;
  const auto per_channel = [&](const std::string& name) -> std::optional<std::vector<float>> {
    auto d = dense_now(name);
    // (C, 1, ...): broadcast over the channels of x (N, C, ...).
    if (!d || d->type != TensorProto::FLOAT || static_cast<int64_t>(d->v.size()) != c ||
        d->dims.size() + 1 != in.shape.size() || d->dims[0] != c)
      return std::nullopt;
    return std::vector<float>(d->v.begin(), d->v.end());
  };
  if (const int mul = sole_consumer(output, "Mul"); mul >= 0) {
    const std::string* w = other(g_.node(mul), output);
    const int add = sole_consumer(out0(g_.node(mul)), "Add");
    const std::string* b = add >= 0 ? other(g_.node(add), out0(g_.node(mul))) : nullptr;
    if (w && b && (gamma = per_channel(*w)) && (beta = per_channel(*b))) {
      used.push_back(mul);
      used.push_back(add);
      output = out0(g_.node(add));
    } else {
      gamma.reset();
      beta.reset();
    }
  }
  Op op;
  op.kind = OpKind::GroupNorm;
  op.name = pattern_name(r1, "GroupNorm");
  op.inputs = {x};
  op.attrs.edit().groups = groups;
  op.attrs.edit().eps = decimal_eps(attr_float(inn, "epsilon", 1e-5f));
  if (gamma) {
    op.param_init = {std::make_shared<const std::vector<float>>(std::move(*gamma)),
                     std::make_shared<const std::vector<float>>(std::move(*beta))};
  } else {
    op.attrs.edit().affine = false;
  }
  for (int k : used) done_.insert(k);
  add_op(std::move(op), output, where(r1));
  return true;
}

}  // namespace remat::onnx_import
#endif
