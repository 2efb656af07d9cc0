// ONNX import: walks the graph's nodes in order and maps each onto the memory
// model's kinds; patterns torch.onnx.export decomposes (GELU via Erf, LayerNorm
// before opset 17, MatMul+Add) are matched back into one op. What cannot be
// mapped becomes a simulate-only Generic op, and the user is told.
#include "core/io/onnx_model.h"

#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "core/model_source.h"

#ifdef REMAT_HAVE_ONNX
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#endif

namespace remat {

namespace {

std::string read_bounded(const std::string& path, const std::string& origin) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(origin + ": cannot read it (" + ec.message() + ")");
  if (size > kMaxOnnxFileBytes)
    throw InputError(origin + ": " + std::to_string(size) + " bytes is over the limit of 2 GiB for ONNX models");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(origin + ": cannot open it");
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) throw InputError(origin + ": read failed");
  return bytes;
}

}  // namespace

Model load_onnx_model(const std::string& path) { return load_onnx_model(path, nullptr); }

Model load_onnx_model(const std::string& path, std::vector<std::string>* warnings) {
  const std::string origin = "ONNX file '" + path + "'";
  if (!onnx_support()) throw InputError(origin + ": this build of remat was built without ONNX support (install libonnx-dev and libprotobuf-dev, then reconfigure)");
  const std::string bytes = read_bounded(path, origin);
  return parse_onnx_model(bytes.data(), bytes.size(), origin, std::filesystem::path(path).stem().string(), warnings);
}

#ifndef REMAT_HAVE_ONNX

bool onnx_support() { return false; }

Model parse_onnx_model(const void*, std::size_t, const std::string& origin, const std::string&, std::vector<std::string>*) {
  throw InputError(origin + ": this build of remat was built without ONNX support");
}

#else

bool onnx_support() { return true; }

namespace {

using onnx::NodeProto;
using onnx::TensorProto;

[[noreturn]] void fail_node(const std::string& origin, const NodeProto& n, const std::string& what) {
  throw InputError(origin + ": node '" + n.name() + "' (" + n.op_type() + "): " + what);
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool dtype_of(int32_t elem, DType& out) {
  switch (elem) {
    case TensorProto::FLOAT: out = DType::F32; return true;
    case TensorProto::FLOAT16: out = DType::F16; return true;
    case TensorProto::BFLOAT16: out = DType::BF16; return true;
    case TensorProto::INT32: out = DType::I32; return true;
    default: return false;
  }
}

uint64_t elem_size(int32_t elem) {
  switch (elem) {
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64: return 8;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
    case TensorProto::INT16:
    case TensorProto::UINT16: return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL: return 1;
    default: return 4;
  }
}

struct Value {
  enum Kind { Activation, Constant } kind = Constant;
  int op = -1;                     // Activation: our op producing it
  const TensorProto* tensor = nullptr;  // Constant: its value when known
};

class Importer {
 public:
  Importer(onnx::ModelProto& proto, const std::string& origin, std::vector<std::string>* warnings)
      : g_(*proto.mutable_graph()), origin_(origin), warnings_(warnings) {}

  Model run(const std::string& default_name) {
    // torch.onnx.export names every graph "torch_jit": the file name says more.
    model_.name = g_.name().empty() || g_.name() == "torch_jit" ? default_name : g_.name();
    if (g_.node_size() > static_cast<int>(10'000'000)) fail("graph has more than 10 million nodes");
    collect_shapes();
    for (const auto& t : g_.initializer()) values_[t.name()] = {Value::Constant, -1, &t};
    add_input();
    live_ = live_nodes();
    // Constants first: patterns look ahead at Constant nodes listed after them.
    for (int i = 0; i < g_.node_size(); ++i) {
      if (g_.node(i).op_type() == "Constant" && g_.node(i).output_size() == 1) import_node(i);
    }
    for (int i = 0; i < g_.node_size(); ++i) consumers_index(i);
    for (int i = 0; i < g_.node_size(); ++i) {
      if (!live_[static_cast<std::size_t>(i)] || done_.count(i)) continue;
      import_node(i);
    }
    add_loss();
    model_.finalize();
    return std::move(model_);
  }

 private:
  onnx::GraphProto& g_;
  const std::string& origin_;
  std::vector<std::string>* warnings_;
  Model model_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, std::vector<int64_t>> shapes_;  // known positive shapes
  std::unordered_map<std::string, int32_t> elem_types_;
  std::unordered_map<std::string, std::vector<int>> consumers_;   // tensor -> live node indices
  std::vector<bool> live_;
  std::set<int> done_;
  std::vector<std::string> generic_;  // names of simulate-only ops
  bool softmax_head_ = false;         // the output is a Softmax of the logits
  std::string softmax_type_;

  [[noreturn]] void fail(const std::string& what) { throw InputError(origin_ + ": " + what); }
  void warn(const std::string& w) {
    if (warnings_) warnings_->push_back(w);
  }

  void note_type(const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type()) return;
    const auto& tt = vi.type().tensor_type();
    elem_types_[vi.name()] = tt.elem_type();
    if (!tt.has_shape()) return;
    std::vector<int64_t> s;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() <= 0) return;
      s.push_back(d.dim_value());
    }
    if (s.size() <= 8) shapes_[vi.name()] = std::move(s);
  }

  void collect_shapes() {
    for (const auto& vi : g_.input()) note_type(vi);
    for (const auto& vi : g_.value_info()) note_type(vi);
    for (const auto& vi : g_.output()) note_type(vi);
  }

  bool is_initializer(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Constant;
  }

  void add_input() {
    const onnx::ValueInfoProto* input = nullptr;
    int count = 0;
    for (const auto& vi : g_.input()) {
      if (is_initializer(vi.name())) continue;  // older exports list weights as inputs
      ++count;
      if (!input) input = &vi;
    }
    if (count != 1)
      fail("the graph has " + std::to_string(count) + " data inputs; a remat model takes exactly one input batch");
    const std::string& name = input->name();
    if (!input->type().has_tensor_type()) fail("graph input '" + name + "' is not a tensor");
    const auto& tt = input->type().tensor_type();
    Op op;
    op.kind = OpKind::Input;
    op.name = name;
    if (!dtype_of(tt.elem_type(), op.dtype)) fail("graph input '" + name + "' has an element type remat cannot hold (use float32)");
    if (tt.shape().dim_size() == 0) fail("graph input '" + name + "' has no shape");
    if (tt.shape().dim_size() > 8) fail("graph input '" + name + "' has rank " + std::to_string(tt.shape().dim_size()) + ", over the limit of 8");
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (!d.has_dim_value() || d.dim_value() <= 0)
        fail("graph input '" + name + "' has a symbolic or unknown dimension" +
             (d.has_dim_param() ? " '" + d.dim_param() + "'" : "") + " at axis " + std::to_string(i) +
             "; export with fixed sizes (no dynamic_axes)");
      op.shape.push_back(d.dim_value());
    }
    add_op(std::move(op), name, "graph input '" + name + "'");
  }

  // Nodes that lead to the graph output; the rest (unused Dropout masks,
  // dead code) are skipped.
  std::vector<bool> live_nodes() {
    if (g_.output_size() != 1)
      fail("the graph has " + std::to_string(g_.output_size()) + " outputs; remat needs exactly one (the loss is appended to it)");
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < g_.node_size(); ++i) {
      for (const auto& o : g_.node(i).output()) {
        if (!o.empty()) producer.emplace(o, i);
      }
    }
    std::vector<bool> live(static_cast<std::size_t>(g_.node_size()), false);
    std::vector<std::string> stack = {g_.output(0).name()};
    while (!stack.empty()) {
      const std::string t = std::move(stack.back());
      stack.pop_back();
      auto it = producer.find(t);
      if (it == producer.end() || live[static_cast<std::size_t>(it->second)]) continue;
      live[static_cast<std::size_t>(it->second)] = true;
      for (const auto& in : g_.node(it->second).input()) stack.push_back(in);
    }
    return live;
  }

  void consumers_index(int i) {
    if (!live_[static_cast<std::size_t>(i)]) return;
    for (const auto& in : g_.node(i).input()) {
      auto& c = consumers_[in];
      if (c.empty() || c.back() != i) c.push_back(i);
    }
  }

  int add_op(Op op, const std::string& output, const std::string& where) {
    if (model_.size() >= 10'000'000) fail("more than 10 million ops");
    const int id = model_.add(std::move(op), origin_ + ": " + where);
    values_[output] = {Value::Activation, id, nullptr};
    return id;
  }

  // --- constants -------------------------------------------------------------

  const TensorProto* constant(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.kind != Value::Constant) return nullptr;
    return it->second.tensor;
  }
  bool is_constant(const std::string& name) const {
    if (name.empty()) return true;  // an omitted optional input
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Constant;
  }
  int activation(const std::string& name) const {
    auto it = values_.find(name);
    return it != values_.end() && it->second.kind == Value::Activation ? it->second.op : -1;
  }

  // Values of a float/double tensor; nullopt when absent, external or malformed.
  std::optional<std::vector<float>> floats(const TensorProto* t) const {
    if (!t || t->data_location() == TensorProto::EXTERNAL) return std::nullopt;
    uint64_t n = 1;
    for (int64_t d : t->dims()) {
      if (d < 0 || (d > 0 && n > (uint64_t{1} << 34) / static_cast<uint64_t>(d))) return std::nullopt;
      n *= static_cast<uint64_t>(d);
    }
    std::vector<float> out;
    if (t->data_type() == TensorProto::FLOAT) {
      if (t->has_raw_data()) {
        if (t->raw_data().size() != n * 4) return std::nullopt;
        out.resize(n);
        if (n) std::memcpy(out.data(), t->raw_data().data(), n * 4);
      } else {
        if (static_cast<uint64_t>(t->float_data_size()) != n) return std::nullopt;
        out.assign(t->float_data().begin(), t->float_data().end());
      }
    } else if (t->data_type() == TensorProto::DOUBLE) {
      if (t->has_raw_data()) {
        if (t->raw_data().size() != n * 8) return std::nullopt;
        out.resize(n);
        for (uint64_t i = 0; i < n; ++i) {
          double d;
          std::memcpy(&d, t->raw_data().data() + i * 8, 8);
          out[i] = static_cast<float>(d);
        }
      } else {
        if (static_cast<uint64_t>(t->double_data_size()) != n) return std::nullopt;
        for (double d : t->double_data()) out.push_back(static_cast<float>(d));
      }
    } else {
      return std::nullopt;
    }
    return out;
  }
  std::optional<float> scalar(const std::string& name) const {
    auto v = floats(constant(name));
    if (!v || v->size() != 1) return std::nullopt;
    return (*v)[0];
  }
  bool scalar_is(const std::string& name, float x, float tol = 1e-4f) const {
    auto s = scalar(name);
    return s && std::fabs(*s - x) <= tol * std::max(1.0f, std::fabs(x));
  }
  std::vector<int64_t> dims(const TensorProto* t) const { return {t->dims().begin(), t->dims().end()}; }

  // --- pattern helpers ---------------------------------------------------------

  // The only live consumer of `tensor`, if it has exactly one and it is of `type`.
  int sole_consumer(const std::string& tensor, const char* type) const {
    auto it = consumers_.find(tensor);
    if (it == consumers_.end() || it->second.size() != 1) return -1;
    const int c = it->second[0];
    return g_.node(c).op_type() == type && !done_.count(c) ? c : -1;
  }
  static const std::string& out0(const NodeProto& n) {
    static const std::string none;
    return n.output_size() ? n.output(0) : none;
  }
  // The other input of a binary node, given one of them.
  static const std::string* other(const NodeProto& n, const std::string& one) {
    if (n.input_size() != 2) return nullptr;
    if (n.input(0) == one) return &n.input(1);
    if (n.input(1) == one) return &n.input(0);
    return nullptr;
  }
  int64_t attr_int(const NodeProto& n, const char* name, int64_t fallback) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.i();
    }
    return fallback;
  }
  float attr_float(const NodeProto& n, const char* name, float fallback) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return a.f();
    }
    return fallback;
  }
  std::vector<int64_t> attr_ints(const NodeProto& n, const char* name) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return {a.ints().begin(), a.ints().end()};
    }
    return {};
  }
  bool last_axis_only(const NodeProto& n, std::size_t rank) const {
    const auto axes = attr_ints(n, "axes");
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == static_cast<int64_t>(rank) - 1);
  }

  std::string op_name(const NodeProto& n) const { return n.name().empty() ? out0(n) : n.name(); }
  // A matched pattern is named after its scope: "/ln/ReduceMean" -> "/ln/LayerNorm".
  std::string pattern_name(const NodeProto& first, const char* kind) const {
    const std::string n = op_name(first);
    const auto slash = n.rfind('/');
    return slash == std::string::npos ? n + "." + kind : n.substr(0, slash + 1) + kind;
  }
  std::string where(const NodeProto& n) const { return "node '" + op_name(n) + "' (" + n.op_type() + ")"; }

  // --- mapping -----------------------------------------------------------------

  void import_node(int i) {
    const NodeProto& n = g_.node(i);
    if (n.output_size() == 0 || out0(n).empty()) fail_node(origin_, n, "has no output");
    std::vector<std::string> acts;  // activation inputs
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      if (values_.find(in) == values_.end())
        fail_node(origin_, n, "input '" + in + "' is not produced by an earlier node, an initializer or the graph input "
                              "(dangling, or nodes out of topological order)");
      if (!is_constant(in)) acts.push_back(in);
    }
    const std::string& type = n.op_type();
    if (type == "Constant") {
      const TensorProto* t = nullptr;
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) t = &a.t();
      }
      values_[out0(n)] = {Value::Constant, -1, t};
      done_.insert(i);
      return;
    }
    if (acts.empty()) {  // shape arithmetic and other constant subgraphs: no activation
      for (const auto& o : n.output()) values_[o] = {Value::Constant, -1, nullptr};
      done_.insert(i);
      return;
    }
    done_.insert(i);
    const int x = activation(acts[0]);
    const Op& in = model_.op(x);
    auto simple = [&](OpKind k) {
      Op op;
      op.kind = k;
      op.name = op_name(n);
      op.inputs = {x};
      return add_op(std::move(op), out0(n), where(n));
    };
    if (acts.size() == 1) {
      if (type == "Relu") return (void)simple(OpKind::ReLU);
      if (type == "Tanh") return (void)simple(OpKind::Tanh);
      if (type == "Gelu" && attr_int(n, "approximate", 0) == 0) return (void)simple(OpKind::GELU);
      if (type == "Identity") return alias(n, x);
      if (type == "Dropout") return dropout(n, x);
      if ((type == "Reshape" || type == "Flatten" || type == "Squeeze" || type == "Unsqueeze") && same_view(n, in))
        return alias(n, x);
      if (type == "Transpose" && identity_perm(n)) return alias(n, x);
      if ((type == "Softmax" || type == "LogSoftmax") && out0(n) == g_.output(0).name() && !consumers_.count(out0(n)) &&
          (attr_int(n, "axis", -1) == -1 || attr_int(n, "axis", -1) == static_cast<int64_t>(in.shape.size()) - 1)) {
        softmax_head_ = true;
        softmax_type_ = type;
        values_[out0(n)] = {Value::Activation, x, nullptr};
        return;
      }
      if (type == "Gemm" && gemm(n, x)) return;
      if (type == "MatMul" && matmul(n, x)) return;
      if (type == "Div" && gelu_erf(n, x)) return;
      if (type == "ReduceMean" && layernorm_decomposed(n, x)) return;
      if (type == "LayerNormalization" && layernorm(n, x)) return;
    } else if (acts.size() == 2 && type == "Add" && n.input_size() == 2) {
      const int y = activation(acts[1]);
      if (model_.op(y).shape == in.shape) {
        Op op;
        op.kind = OpKind::Add;
        op.name = op_name(n);
        op.inputs = {x, y};
        add_op(std::move(op), out0(n), where(n));
        return;
      }
    }
    generic(n, acts);
  }

  void alias(const NodeProto& n, int x) {
    values_[out0(n)] = {Value::Activation, x, nullptr};
    if (n.op_type() != "Identity") warn(where(n) + " keeps the (rows, features) layout: folded into its input");
  }

  // Reshape-like ops are views on our (rows, features) layout when the last
  // dimension and the element count are unchanged.
  bool same_view(const NodeProto& n, const Op& in) const {
    auto it = shapes_.find(out0(n));
    if (it == shapes_.end() || it->second.empty()) return false;
    int64_t numel = 1;
    for (int64_t d : it->second) numel *= d;
    return it->second.back() == in.cols() && numel == in.numel();
  }
  bool identity_perm(const NodeProto& n) const {
    const auto perm = attr_ints(n, "perm");
    if (perm.empty()) return false;  // default perm reverses the axes
    for (std::size_t k = 0; k < perm.size(); ++k) {
      if (perm[k] != static_cast<int64_t>(k)) return false;
    }
    return true;
  }

  void dropout(const NodeProto& n, int x) {
    float p = attr_float(n, "ratio", 0.5f);  // opset < 12
    if (n.input_size() > 1 && !n.input(1).empty()) {
      auto r = scalar(n.input(1));
      if (!r) fail_node(origin_, n, "the dropout ratio is not a constant scalar");
      p = *r;
    }
    if (!(p >= 0.0f && p < 1.0f)) fail_node(origin_, n, "dropout ratio " + std::to_string(p) + " is not in [0, 1)");
    Op op;
    op.kind = OpKind::Dropout;
    op.name = op_name(n);
    op.inputs = {x};
    op.dropout_p = p;
    add_op(std::move(op), out0(n), where(n));
  }

  // Linear y = x W^T + b, W (out, in) as the kernels take it.
  int add_linear(const NodeProto& n, const std::string& output, int x, std::vector<float> w_out_in, int64_t out,
                 std::vector<float> bias) {
    const Op& in = model_.op(x);
    Op op;
    op.kind = OpKind::Linear;
    op.name = op_name(n);
    op.inputs = {x};
    op.shape = in.shape;
    op.shape.back() = out;
    if (bias.empty()) bias.assign(static_cast<std::size_t>(out), 0.0f);
    op.param_init = {std::make_shared<const std::vector<float>>(std::move(w_out_in)),
                     std::make_shared<const std::vector<float>>(std::move(bias))};
    return add_op(std::move(op), output, where(n));
  }

  // A constant weight of shape (rows, cols), transposed into (out, in) when
  // `in_out` (MatMul's and Gemm transB=0's layout).
  std::optional<std::vector<float>> weight(const NodeProto& n, const std::string& name, int64_t in_features,
                                           bool in_out, int64_t& out) {
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

  std::optional<std::vector<float>> bias_of(const std::string& name, int64_t out) const {
    const TensorProto* t = constant(name);
    auto v = floats(t);
    if (!v) return std::nullopt;
    if (static_cast<int64_t>(v->size()) == out) return v;
    if (v->size() == 1) return std::vector<float>(static_cast<std::size_t>(out), (*v)[0]);
    return std::nullopt;
  }

  bool gemm(const NodeProto& n, int x) {
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
  bool matmul(const NodeProto& n, int x) {
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
  bool gelu_erf(const NodeProto& div, int x) {
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

  int add_layernorm(const NodeProto& n, const std::string& name, const std::string& output, int x,
                    std::optional<std::vector<float>> gamma, std::optional<std::vector<float>> beta, float eps) {
    const Op& in = model_.op(x);
    const auto d = static_cast<std::size_t>(in.cols());
    if (!gamma) gamma = std::vector<float>(d, 1.0f);
    if (!beta) beta = std::vector<float>(d, 0.0f);
    if (std::fabs(eps - 1e-5f) > 1e-7f)
      warn(where(n) + ": epsilon " + std::to_string(eps) + " differs from the executor's 1e-5");
    Op op;
    op.kind = OpKind::LayerNorm;
    op.name = name;
    op.inputs = {x};
    op.param_init = {std::make_shared<const std::vector<float>>(std::move(*gamma)),
                     std::make_shared<const std::vector<float>>(std::move(*beta))};
    return add_op(std::move(op), output, where(n));
  }

  std::optional<std::vector<float>> vector_of(const std::string& name, int64_t d) const {
    auto v = floats(constant(name));
    if (!v || static_cast<int64_t>(v->size()) != d) return std::nullopt;
    return v;
  }

  bool layernorm(const NodeProto& n, int x) {
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
  bool layernorm_decomposed(const NodeProto& mean, int x) {
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

  // Anything else: a simulate-only op sized from its (inferred) output shape.
  void generic(const NodeProto& n, const std::vector<std::string>& acts) {
    Op op;
    op.kind = OpKind::Generic;
    op.name = op_name(n);
    for (const auto& a : acts) op.inputs.push_back(activation(a));
    auto it = shapes_.find(out0(n));
    int32_t elem = TensorProto::FLOAT;
    if (auto et = elem_types_.find(out0(n)); et != elem_types_.end()) elem = et->second;
    if (it != shapes_.end() && !it->second.empty()) {
      op.shape = it->second;
    } else {
      op.shape = model_.op(op.inputs[0]).shape;
      warn(where(n) + ": output shape unknown after shape inference; sized like its first input " + shape_str(op.shape));
    }
    if (!dtype_of(elem, op.dtype)) op.dtype = DType::F32;
    try {
      op.bytes = tensor_bytes(op.shape, DType::I32) / 4 * elem_size(elem);
    } catch (const InputError& e) {
      fail_node(origin_, n, std::string("output ") + e.what());
    }
    op.bytes = std::max<uint64_t>(op.bytes, 1);
    // Cost estimate: matrix products by their multiply-adds, the rest by elements.
    const double numel = static_cast<double>(op.numel());
    double fwd = numel;
    if (n.op_type() == "MatMul" || n.op_type() == "Gemm") {
      const auto& a = model_.op(op.inputs[0]);
      fwd = 2.0 * numel * static_cast<double>(a.cols());
    } else if (n.op_type() == "Conv" && n.input_size() > 1) {
      if (const TensorProto* w = constant(n.input(1)); w && w->dims_size() >= 2) {
        double k = 1;
        for (int d = 1; d < w->dims_size(); ++d) k *= static_cast<double>(std::max<int64_t>(w->dims(d), 1));
        fwd = 2.0 * numel * k;
      }
    }
    op.fwd_flops = std::max(fwd, 1.0);
    op.bwd_flops = 2 * op.fwd_flops;
    for (const auto& in : n.input()) {
      if (const TensorProto* t = constant(in)) {
        uint64_t pn = elem_size(t->data_type());
        for (int64_t d : t->dims()) pn = d > 0 && pn < (uint64_t{1} << 40) ? pn * static_cast<uint64_t>(d) : pn;
        op.param_bytes += pn;
      }
    }
    generic_.push_back(op.name + " (" + n.op_type() + ")");
    const int id = add_op(std::move(op), out0(n), where(n));
    for (int k = 1; k < n.output_size(); ++k) {
      if (!n.output(k).empty()) values_[n.output(k)] = {Value::Activation, id, nullptr};
    }
  }

  void add_loss() {
    const std::string& out = g_.output(0).name();
    int y = activation(out);
    if (y < 0) fail("graph output '" + out + "' is not computed from the input");
    if (y == 0) fail("graph output '" + out + "' is the input itself: there is nothing to checkpoint");
    Op loss;
    loss.name = "loss";
    if (softmax_head_) {
      loss.kind = OpKind::SoftmaxCELoss;
      warn("the final " + softmax_type_ + " is taken as a classifier head: appended a SoftmaxCELoss on its input (the logits), with integer labels");
    } else {
      loss.kind = OpKind::MSELoss;
      warn("appended an MSELoss on the graph output '" + out + "' (an exported model has no loss)");
    }
    loss.inputs = {y};
    if (!generic_.empty()) {
      std::string list;
      for (std::size_t k = 0; k < generic_.size() && k < 20; ++k) list += (k ? ", " : "") + generic_[k];
      if (generic_.size() > 20) list += ", ... (" + std::to_string(generic_.size() - 20) + " more)";
      warn(std::to_string(generic_.size()) + " op(s) have no kernel here and were imported as simulate-only Generic ops "
           "(sized from their shapes, estimated costs): " + list);
    }
    model_.add(std::move(loss), origin_ + ": appended loss");
  }
};

}  // namespace

Model parse_onnx_model(const void* data, std::size_t size, const std::string& origin, const std::string& default_name,
                       std::vector<std::string>* warnings) {
  if (size > kMaxOnnxFileBytes) throw InputError(origin + ": over the limit of 2 GiB for ONNX models");
  onnx::ModelProto proto;
  if (size == 0 || !proto.ParseFromArray(data, static_cast<int>(size)))
    throw InputError(origin + ": not an ONNX model (the protobuf could not be parsed: truncated or another format)");
  if (!proto.has_graph() || proto.graph().node_size() == 0)
    throw InputError(origin + ": not an ONNX model, or an empty one (no graph nodes)");
  try {
    onnx::shape_inference::InferShapes(proto);
  } catch (const std::exception& e) {
    if (warnings) warnings->push_back(std::string("ONNX shape inference failed (") + e.what() + "); using the shapes stored in the file");
  }
  Importer imp(proto, origin, warnings);
  return imp.run(default_name);
}

#endif

}  // namespace remat
