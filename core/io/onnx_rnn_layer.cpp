#ifdef REMAT_HAVE_ONNX
#include "core/io/onnx_rnn_layer.h"

#include <algorithm>

#include "core/model/op_layout.h"

namespace remat::onnx_import {

namespace {

// ONNX's gate blocks of `rows` rows each, in PyTorch's order: block k is ONNX's from[k].
std::vector<float> torch_order(const std::vector<float>& v, const std::vector<int>& from, std::size_t rows, std::size_t cols) {
  const std::size_t block = rows * cols;
  std::vector<float> out(v.size());
  for (std::size_t k = 0; k < from.size(); ++k)
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(from[k]) * block),
              v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(from[k] + 1) * block),
              out.begin() + static_cast<std::ptrdiff_t>(k * block));
  return out;
}

}  // namespace

RnnLayer::RnnLayer(Importer& im, const NodeProto& n, int x, std::vector<int> from, std::vector<std::string> activations,
                   std::vector<int> states, std::vector<int> refused)
    : im_(im), n_(n), x_(x), base_(im.op_name(n)) {
  const Op& in = im.model_.op(x);
  if (im.activation(n.input(0)) != x || in.shape.size() != 3 || in.dtype != DType::F32) return;
  t_len = in.shape[0], batch = in.shape[1], feat = in.shape[2];
  h = im.attr_int(n, "hidden_size", 0);
  if (h <= 0 || h > (int64_t{1} << 20) || t_len * batch > (int64_t{1} << 24) || im.attr_int(n, "layout", 0) != 0) return;
  for (const auto& a : n.attribute()) {
    if (a.name() == "clip") return;
    if (a.name() == "direction" && a.s() != "forward") return;
    if (a.name() == "activations") {
      if (static_cast<std::size_t>(a.strings_size()) != activations.size()) return;
      for (int k = 0; k < a.strings_size(); ++k)
        if (a.strings(k) != activations[static_cast<std::size_t>(k)]) return;
    }
  }
  const auto input = [&](int k) -> std::string { return n.input_size() > k ? n.input(k) : std::string(); };
  for (int k : refused)
    if (!input(k).empty()) return;
  const int64_t g = static_cast<int64_t>(from.size());
  const auto w = im.dense_now(input(1)), r = im.dense_now(input(2));
  if (!w || !r || w->v.size() != static_cast<std::size_t>(g * h * feat) || r->v.size() != static_cast<std::size_t>(g * h * h)) return;
  std::vector<float> b(static_cast<std::size_t>(2 * g * h), 0.0f);
  if (!input(3).empty()) {
    const auto bd = im.dense_now(input(3));
    if (!bd || bd->v.size() != b.size()) return;
    b.assign(bd->v.begin(), bd->v.end());
  }
  for (int k : states) {  // absent or zero
    if (input(k).empty()) continue;
    const auto s = im.dense_now(input(k));
    if (!s || s->v.size() != static_cast<std::size_t>(batch * h)) return;
    for (const double e : s->v)
      if (e != 0.0) return;
  }
  const auto as_floats = [](const Importer::Dense& d) { return std::vector<float>(d.v.begin(), d.v.end()); };
  const auto hs = static_cast<std::size_t>(h);
  w_ih = std::make_shared<const std::vector<float>>(torch_order(as_floats(*w), from, hs, static_cast<std::size_t>(feat)));
  w_hh = std::make_shared<const std::vector<float>>(torch_order(as_floats(*r), from, hs, hs));
  b_ih = torch_order(std::vector<float>(b.begin(), b.begin() + g * h), from, hs, 1);
  b_hh = std::make_shared<const std::vector<float>>(torch_order(std::vector<float>(b.begin() + g * h, b.end()), from, hs, 1));
  ok_ = true;
}

bool RnnLayer::has_bias() const { return n_.input_size() > 3 && !n_.input(3).empty(); }

int RnnLayer::add(Op op, const char* what) {
  op.name = base_ + "." + what + "." + std::to_string(step_++);
  return im_.add_op(std::move(op), "", im_.where(n_));  // named outputs are set by set_output
}

int RnnLayer::reshape(int of, std::vector<int64_t> shape, bool copy) {
  Op op;
  op.kind = OpKind::Reshape;
  op.inputs = {of};
  op.shape = std::move(shape);
  op.attrs.edit().copy = copy;
  return add(std::move(op), copy ? "clone" : "reshape");
}

int RnnLayer::slice(int of, int64_t axis, int64_t start, int64_t end) {
  Op op;
  op.kind = OpKind::Slice;
  op.inputs = {of};
  op.attrs.edit().axis = axis;
  op.attrs.edit().start = start;
  op.attrs.edit().end = end;
  return add(std::move(op), "slice");
}

int RnnLayer::pointwise(pw::Fn fn, std::vector<int> inputs, const char* what, uint64_t aux) {
  Op op;
  op.kind = OpKind::Pointwise;
  op.attrs.edit().fn = static_cast<uint8_t>(fn);
  pw::attr_defaults(fn, op.attrs.edit().alpha, op.attrs.edit().beta);
  op.inputs = std::move(inputs);
  op.aux_bytes = aux;
  return add(std::move(op), what);
}

int RnnLayer::simple(OpKind kind, std::vector<int> inputs, const char* what) {
  Op op;
  op.kind = kind;
  op.inputs = std::move(inputs);
  return add(std::move(op), what);
}

int RnnLayer::input_gates() {
  const Op& in = im_.model_.op(x_);
  const int64_t gh = static_cast<int64_t>(b_ih.size());
  int xs = x_;
  if (in.strides->size() && !is_contiguous(in.shape, *in.strides)) xs = reshape(x_, in.shape, true);
  Op ih;
  ih.kind = OpKind::Linear;
  ih.inputs = {reshape(xs, {t_len * batch, feat})};
  ih.shape = {t_len * batch, gh};
  ih.attrs.edit().bias = false;
  ih.param_init = {w_ih};
  const int flat = add(std::move(ih), "linear");
  Op bias;
  bias.kind = OpKind::AddConst;
  bias.inputs = {reshape(flat, {t_len, batch, gh})};
  bias.attrs.edit().const_shape = {gh};
  bias.attrs.edit().learned = true;
  bias.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(b_ih)};
  return add(std::move(bias), "addconst");
}

bool RnnLayer::reads(int k) const {
  return n_.output_size() > k && !n_.output(k).empty() && (im_.consumers_.count(n_.output(k)) || n_.output(k) == im_.output_);
}

int RnnLayer::stack(const std::vector<int>& hs) {
  Op cat;
  cat.kind = OpKind::Concat;
  for (const int hv : hs) cat.inputs.push_back(reshape(hv, {1, batch, h}));
  cat.attrs.edit().axis = 0;
  return add(std::move(cat), "stack");
}

void RnnLayer::set_output(int k, int v, std::vector<int64_t> shape) {
  im_.values_[n_.output(k)] = {Value::Activation, reshape(v, std::move(shape)), nullptr};
}

}  // namespace remat::onnx_import
#endif
