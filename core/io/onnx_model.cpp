// ONNX import: walks the graph's nodes in order and maps each onto the memory
// model's kinds; patterns torch.onnx.export decomposes (GELU via Erf, LayerNorm
// before opset 17, MatMul+Add) are matched back into one op. What cannot be
// mapped becomes a simulate-only Generic op, and the user is told.
#include "core/io/onnx_model.h"

#include <filesystem>
#include <fstream>

#include "core/base/errors.h"
#include "core/io/model_source.h"

#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/io/onnx_importer.h"
#include "core/model/op_layout.h"
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

namespace onnx_import {


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
    case TensorProto::INT64: out = DType::I64; return true;
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

Model Importer::run(const std::string& default_name) {
  // torch.onnx.export names every graph "torch_jit" (1.13) or "main_graph"
  // (2.x): the file name says more.
  const bool placeholder = g_.name().empty() || g_.name() == "torch_jit" || g_.name() == "main_graph";
  model_.name = placeholder ? default_name : g_.name();
  if (g_.node_size() > static_cast<int>(10'000'000)) fail("graph has more than 10 million nodes");
  collect_shapes();
  output_ = choose_output();
  for (const auto& t : g_.initializer()) values_[t.name()] = {Value::Constant, -1, &t};
  for (const auto& n : g_.node()) has_batchnorm_ = has_batchnorm_ || n.op_type() == "BatchNormalization";
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
  eval_mode_note();
  return std::move(model_);
}

void Importer::note_type(const onnx::ValueInfoProto& vi) {
  if (!vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  elem_types_[vi.name()] = tt.elem_type();
  if (!tt.has_shape()) return;
  std::vector<int64_t> s;
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() <= 0) return;
    s.push_back(d.dim_value());
  }
  if (s.size() > 8) return;
  try {
    (void)tensor_bytes(s, DType::F32);  // absurd inferred sizes count as unknown (found by fuzzing)
  } catch (const InputError&) {
    return;
  }
  shapes_[vi.name()] = std::move(s);
}

void Importer::collect_shapes() {
  for (const auto& vi : g_.input()) note_type(vi);
  for (const auto& vi : g_.value_info()) note_type(vi);
  for (const auto& vi : g_.output()) note_type(vi);
}

void Importer::add_input() {
  const onnx::ValueInfoProto* input = nullptr;
  int count = 0;
  for (const auto& vi : g_.input()) {
    if (is_initializer(vi.name())) continue;  // older exports list weights as inputs
    if (labels_.empty() && labels_only(vi)) {  // the executor draws labels, as for an appended loss
      labels_ = vi.name();
      values_[labels_] = {Value::Constant, -1, nullptr};
      continue;
    }
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
  if (!dtype_of(tt.elem_type(), op.dtype))
    fail("graph input '" + name + "' has an element type remat cannot hold (float32/16, bfloat16, or int32/64 ids)");
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
std::vector<bool> Importer::live_nodes() {
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < g_.node_size(); ++i) {
    for (const auto& o : g_.node(i).output()) {
      if (!o.empty()) producer.emplace(o, i);
    }
  }
  std::vector<bool> live(static_cast<std::size_t>(g_.node_size()), false);
  std::vector<std::string> stack = {output_};
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

void Importer::consumers_index(int i) {
  if (!live_[static_cast<std::size_t>(i)]) return;
  for (const auto& o : g_.node(i).output())
    if (!o.empty()) producer_.emplace(o, i);
  for (const auto& in : g_.node(i).input()) {
    auto& c = consumers_[in];
    if (c.empty() || c.back() != i) c.push_back(i);
  }
}

int Importer::add_op(Op op, const std::string& output, const std::string& where, bool explicit_saved) {
  if (model_.size() >= 10'000'000) fail("more than 10 million ops");
  // The element type shape inference gives (f16 exports stay f16); views and
  // Concat take their input's, the loss and the input are set by the caller.
  if (auto et = elem_types_.find(output); et != elem_types_.end() && op.kind != OpKind::Input) {
    DType d;
    if (dtype_of(et->second, d) && !is_integer(d)) op.dtype = d;
  }
  const int id = model_.add(std::move(op), origin_ + ": " + where, explicit_saved);
  values_[output] = {Value::Activation, id, nullptr};
  return id;
}

// Values of a float/double tensor; nullopt when absent, external or malformed.
std::optional<std::vector<float>> Importer::floats(const TensorProto* t) const {
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
  } else if (t->data_type() == TensorProto::BOOL) {  // a mask, as 0/1
    if (t->has_raw_data()) {
      if (t->raw_data().size() != n) return std::nullopt;
      for (const char c : t->raw_data()) out.push_back(c != 0 ? 1.0f : 0.0f);
    } else {
      if (static_cast<uint64_t>(t->int32_data_size()) != n) return std::nullopt;
      for (const int32_t b : t->int32_data()) out.push_back(b != 0 ? 1.0f : 0.0f);
    }
  } else if (t->data_type() == TensorProto::INT64 || t->data_type() == TensorProto::INT32) {  // a folded integer
    auto v = ints(t);
    if (!v) return std::nullopt;
    for (const int64_t x : *v) out.push_back(static_cast<float>(x));
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<int64_t>> Importer::ints(const TensorProto* t) const {
  if (!t || t->data_location() == TensorProto::EXTERNAL) return std::nullopt;
  uint64_t n = 1;
  for (int64_t d : t->dims()) {
    if (d < 0 || (d > 0 && n > (uint64_t{1} << 24) / static_cast<uint64_t>(d))) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  std::vector<int64_t> out;
  if (t->data_type() == TensorProto::INT64) {
    if (t->has_raw_data()) {
      if (t->raw_data().size() != n * 8) return std::nullopt;
      out.resize(n);
      if (n) std::memcpy(out.data(), t->raw_data().data(), n * 8);
    } else {
      if (static_cast<uint64_t>(t->int64_data_size()) != n) return std::nullopt;
      out.assign(t->int64_data().begin(), t->int64_data().end());
    }
  } else if (t->data_type() == TensorProto::INT32) {
    if (t->has_raw_data()) {
      if (t->raw_data().size() != n * 4) return std::nullopt;
      for (uint64_t i = 0; i < n; ++i) {
        int32_t x;
        std::memcpy(&x, t->raw_data().data() + i * 4, 4);
        out.push_back(x);
      }
    } else {
      if (static_cast<uint64_t>(t->int32_data_size()) != n) return std::nullopt;
      out.assign(t->int32_data().begin(), t->int32_data().end());
    }
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<bool> Importer::flag(const std::string& name) const {
  const TensorProto* t = constant(name);
  if (!t) return std::nullopt;
  if (t->data_type() == TensorProto::BOOL) {
    if (t->has_raw_data()) return !t->raw_data().empty() && t->raw_data()[0] != 0;
    if (t->int32_data_size() > 0) return t->int32_data(0) != 0;
    return std::nullopt;
  }
  if (auto v = ints(t); v && !v->empty()) return (*v)[0] != 0;
  if (auto v = floats(t); v && !v->empty()) return (*v)[0] != 0;
  return std::nullopt;
}

double Importer::decimal_eps(float eps) {
  if (!(eps > 0) || eps == 1e-5f) return 0;
  for (int digits = 1; digits <= 9; ++digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(eps));
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == eps) return d;
  }
  return eps;
}

std::optional<float> Importer::scalar(const std::string& name) const {
  auto v = floats(constant(name));
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

void Importer::import_node(int i) {
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
  // The memory model's checks are quadratic in an op's inputs; no real op has this many.
  if (acts.size() > 256) fail_node(origin_, n, std::to_string(acts.size()) + " activation inputs are over the limit of 256");
  const std::string& type = n.op_type();
  if (type == "Constant") {
    const TensorProto* t = nullptr;
    for (const auto& a : n.attribute()) {
      if (a.name() == "value" && a.has_t()) t = &a.t();
      // The scalar and list forms (torch writes `value`; other exporters these).
      Dense d;
      if (a.name() == "value_float" || a.name() == "value_floats") {
        d.type = TensorProto::FLOAT;
        if (a.name() == "value_float") d.v = {a.f()};
        else d.v.assign(a.floats().begin(), a.floats().end());
      } else if (a.name() == "value_int" || a.name() == "value_ints") {
        d.type = TensorProto::INT64;
        if (a.name() == "value_int") d.v = {static_cast<double>(a.i())};
        else for (const int64_t x : a.ints()) d.v.push_back(static_cast<double>(x));
      }
      if (d.type == 0) continue;
      if (a.name() == "value_floats" || a.name() == "value_ints") d.dims = {static_cast<int64_t>(d.v.size())};
      t = store(d);
    }
    values_[out0(n)] = {Value::Constant, -1, t};
    done_.insert(i);
    return;
  }
  if (acts.empty()) {  // shape arithmetic and other constant subgraphs: no activation
    done_.insert(i);
    if (fold_constant(n)) return;
    for (const auto& o : n.output()) values_[o] = {Value::Constant, -1, nullptr};
    return;
  }
  done_.insert(i);
  const int x = activation(acts[0]);
  const Op& in = model_.op(x);
  if (acts.size() == 1 && fold_shape_of(n, x)) return;
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
    if (type == "Sigmoid" && silu(n, x)) return;
    if (type == "Sigmoid") return (void)simple(OpKind::Sigmoid);
    if (type == "Identity") return alias(n, x);
    if (type == "Pad" && zero_pad(n)) return (void)(values_[out0(n)] = {Value::Activation, x, nullptr});
    if (type == "Pad" && pad(n, x)) return;
    if (type == "Dropout") return dropout(n, x);
    if (type == "Reshape" && groupnorm(n, x)) return;
    if ((type == "Reshape" || type == "Flatten" || type == "Squeeze" || type == "Unsqueeze") && foldable_view(n, in))
      return alias(n, x);
    if (type == "Transpose" && identity_perm(n)) return alias(n, x);
    if ((type == "SoftmaxCrossEntropyLoss" || type == "NegativeLogLikelihoodLoss") && file_loss(n, x)) return;
    if (type == "LogSoftmax" && log_softmax_of_loss(n, x)) return;
    if ((type == "Softmax" || type == "LogSoftmax") && out0(n) == output_ && !consumers_.count(out0(n)) &&
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
    if (type == "Conv" && conv(n, x)) return;
    if (type == "ConvTranspose" && conv_transpose(n, x)) return;
    if ((type == "Resize" || type == "Upsample") && resize(n, x)) return;
    if (type == "BatchNormalization" && batchnorm(n, x)) return;
    if ((type == "MaxPool" || type == "AveragePool" || type == "GlobalAveragePool") && pool(n, x)) return;
    if (type == "Softmax" && softmax(n, x)) return;
    if ((type == "Mul" || type == "Div" || type == "Add" || type == "Sub") && with_constant(n, x)) return;
    if (type == "Where" && masked_fill(n, x)) return;
    if (type == "Clip" && clip(n, x)) return;
    if ((type == "ReduceSum" || type == "ReduceMean" || type == "ReduceMax") && reduce(n, x)) return;
    if (unary_fn(n, x)) return;
    if (type == "Gather" && embedding(n, x)) return;
    if (type == "Split" && split(n, x)) return;
    if (type == "TopK" && topk(n, x)) return;
    if ((type == "DepthToSpace" || type == "SpaceToDepth") && depth_space(n, x)) return;
    if (type == "CumSum" && cumsum(n, x)) return;
    if (type == "LSTM" && lstm(n, x)) return;
    if (type == "GRU" && gru(n, x)) return;
    if (view(n, x)) return;
  } else if (acts.size() == 2 && type == "Add" && n.input_size() == 2) {
    const int y = activation(acts[1]);
    // With a strided operand (ConvNeXt's residual of a permuted LayerNorm's
    // output) it is the family's add, as a capture records torch's add there
    // (the same sums; an Add would read those strides too).
    const auto strided = [](const Op& o) { return !o.strides->empty() && !is_contiguous(o.shape, *o.strides); };
    if (model_.op(y).shape == in.shape && !strided(in) && !strided(model_.op(y))) {
      Op op;
      op.kind = OpKind::Add;
      op.name = op_name(n);
      op.inputs = {x, y};
      add_op(std::move(op), out0(n), where(n));
      return;
    }
  } else if (acts.size() == 2 && type == "MatMul" && n.input_size() == 2) {
    if (add_kind(OpKind::MatMul, n, {x, activation(acts[1])}) >= 0) return;
  } else if (acts.size() == 2 && type == "GatherElements" && n.input_size() == 2 && n.input(0) == acts[0]) {
    // torch.gather: by indices the model computed (a TopK's).
    Op op;
    op.kind = OpKind::Gather;
    op.name = op_name(n);
    op.inputs = {x, activation(acts[1])};
    op.attrs.edit().axis = attr_int(n, "axis", 0);
    if (try_add(std::move(op), out0(n), n) >= 0) return;
  }
  if (acts.size() <= 2 && binary_fn(n, acts)) return;
  if (type == "Concat" && concat(n, acts)) return;
  if (type == "Gather" && acts.size() == 1 && select(n, x)) return;
  generic(n, acts);
}

// torch exports nn.AvgPool2d as Pad (pads all zero) then AveragePool; a pad
// of nothing is its input, whatever its mode.
bool Importer::zero_pad(const NodeProto& n) const {
  std::vector<int64_t> pads = attr_ints(n, "pads");  // before opset 11
  if (opset_ >= 11) {
    if (n.input_size() < 2 || n.input(1).empty()) return false;
    const auto v = ints(constant(n.input(1)));
    if (!v) return false;
    pads = *v;
  }
  return !pads.empty() && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

void Importer::alias(const NodeProto& n, int x) {
  values_[out0(n)] = {Value::Activation, x, nullptr};
  if (n.op_type() != "Identity") warn(where(n) + " keeps the (rows, features) layout: folded into its input");
}

bool Importer::foldable_view(const NodeProto& n, const Op& in) const {
  auto it = shapes_.find(out0(n));
  if (it == shapes_.end() || it->second.empty() || in.shape.size() > 2 || it->second.size() > 2) return false;
  int64_t numel = 1;
  for (int64_t d : it->second) numel *= d;
  return it->second.back() == in.cols() && numel == in.numel() && !in.view;
}

bool Importer::identity_perm(const NodeProto& n) const {
  const auto perm = attr_ints(n, "perm");
  if (perm.empty()) return false;  // default perm reverses the axes
  for (std::size_t k = 0; k < perm.size(); ++k) {
    if (perm[k] != static_cast<int64_t>(k)) return false;
  }
  return true;
}

void Importer::dropout(const NodeProto& n, int x) {
  // Opset 12+: a third input says training; absent or false, Dropout is the
  // identity (an inference-mode export).
  if (opset_ >= 12) {
    const bool training = n.input_size() > 2 && !n.input(2).empty() && flag(n.input(2)).value_or(false);
    if (!training) {
      eval_mode_.push_back(where(n));
      values_[out0(n)] = {Value::Activation, x, nullptr};
      return;
    }
  }
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

// Anything else: a simulate-only op sized from its (inferred) output shape.
void Importer::generic(const NodeProto& n, const std::vector<std::string>& acts) {
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

void Importer::add_loss() {
  const std::string& out = output_;
  int y = activation(out);
  if (y < 0) fail("graph output '" + out + "' is not computed from the input");
  if (y == 0) fail("graph output '" + out + "' is the input itself: there is nothing to checkpoint");
  Op loss;
  loss.name = "loss";
  if (!file_loss_.empty()) {
    loss.kind = OpKind::SoftmaxCELoss;
    loss.name = file_loss_;
  } else if (softmax_head_) {
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
  model_.add(std::move(loss), origin_ + (file_loss_.empty() ? ": appended loss" : ": the file's loss"));
}

}  // namespace onnx_import

Model parse_onnx_model(const void* data, std::size_t size, const std::string& origin, const std::string& default_name,
                       std::vector<std::string>* warnings) {
  if (size > kMaxOnnxFileBytes) throw InputError(origin + ": over the limit of 2 GiB for ONNX models");
  onnx::ModelProto proto;
  if (size == 0 || !proto.ParseFromArray(data, static_cast<int>(size)))
    throw InputError(origin + ": not an ONNX model (the protobuf could not be parsed: truncated or another format)");
  if (!proto.has_graph() || proto.graph().node_size() == 0)
    throw InputError(origin + ": not an ONNX model, or an empty one (no graph nodes)");
  std::string why;
  if (!onnx_import::infer_shapes_isolated(proto, why) && warnings)
    warnings->push_back("ONNX shape inference failed (" + why + "); using the shapes stored in the file");
  onnx_import::Importer imp(proto, origin, warnings);
  return imp.run(default_name);
}

#endif

}  // namespace remat
