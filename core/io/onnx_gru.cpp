// ONNX GRU as the ops PyTorch 1.13's CPU GRU runs, which remat_capture records
// for nn.GRU (docs/pytorch.md): the input's gates for every step by one
// Linear and its bias, then per step the hidden state's Linear (at the first
// step, of the zero initial state, its bias alone), cut in three (r, z, n)
// like the input's gates, r = sigmoid(h_r + i_r), z = sigmoid(h_z + i_z),
// n = tanh(i_n + r·h_n), h = (h_prev - n)·z + n, and the steps' h stacked.
// The gates are put in PyTorch's order (r, z, n; ONNX's is z, r, h), so every
// weight is the tensor nn.GRU holds; each step's hidden Linear holds its own
// copy of W_hh and b_hh, as a capture's ops do.
//
// What the ops keep is what PyTorch 1.13 keeps: r·h_n is an in-place mul_ on
// a third of the hidden Linear's output, for which autograd keeps a clone of
// that third (a Reshape copy here, which the mul reads and keeps) and, through
// r's and z's saves, the whole output's storage (the third the mul wrote is
// the mul's aux). At the first step the clone is of b_hn broadcast (aux) and
// the hidden product keeps the zero initial state (aux, as the LSTM's).
//
// Taken: one forward direction, linear_before_reset = 1 (what PyTorch
// exports), default activations, no clip, layout 0, an initial state that is
// absent or zero. Anything else returns false (the node stays Generic).
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <memory>

#include "core/io/onnx_importer.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/op_layout.h"

namespace remat::onnx_import {

namespace {

// ONNX's gate blocks (z, r, h) of `rows` rows each, as PyTorch's (r, z, n).
std::vector<float> torch_gru_order(const std::vector<float>& v, std::size_t rows_per_gate, std::size_t cols) {
  static constexpr int kFrom[3] = {1, 0, 2};  // torch gate k is ONNX gate kFrom[k]
  const std::size_t block = rows_per_gate * cols;
  std::vector<float> out(v.size());
  for (int k = 0; k < 3; ++k)
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(kFrom[k] * block), v.begin() + static_cast<std::ptrdiff_t>((kFrom[k] + 1) * block),
              out.begin() + static_cast<std::ptrdiff_t>(k * block));
  return out;
}

}  // namespace

bool Importer::gru(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  if (activation(n.input(0)) != x || in.shape.size() != 3 || in.dtype != DType::F32) return false;
  const int64_t t_len = in.shape[0], batch = in.shape[1], feat = in.shape[2];
  const int64_t h = attr_int(n, "hidden_size", 0);
  if (h <= 0 || h > (int64_t{1} << 20) || t_len * batch > (int64_t{1} << 24) || attr_int(n, "layout", 0) != 0 ||
      attr_int(n, "linear_before_reset", 0) != 1)
    return false;
  for (const auto& a : n.attribute()) {
    if (a.name() == "clip") return false;
    if (a.name() == "direction" && a.s() != "forward") return false;
    if (a.name() == "activations") {
      const char* want[2] = {"Sigmoid", "Tanh"};
      if (a.strings_size() != 2) return false;
      for (int k = 0; k < 2; ++k)
        if (a.strings(k) != want[k]) return false;
    }
  }
  const auto input = [&](int k) -> std::string { return n.input_size() > k ? n.input(k) : std::string(); };
  if (!input(4).empty()) return false;  // sequence_lens
  const auto w = dense_now(input(1)), r = dense_now(input(2));
  if (!w || !r || w->v.size() != static_cast<std::size_t>(3 * h * feat) || r->v.size() != static_cast<std::size_t>(3 * h * h))
    return false;
  std::vector<float> b(static_cast<std::size_t>(6 * h), 0.0f);
  if (!input(3).empty()) {
    const auto bd = dense_now(input(3));
    if (!bd || bd->v.size() != b.size()) return false;
    b.assign(bd->v.begin(), bd->v.end());
  }
  if (!input(5).empty()) {  // initial_h: absent or zero
    const auto s = dense_now(input(5));
    if (!s || s->v.size() != static_cast<std::size_t>(batch * h)) return false;
    for (const double e : s->v)
      if (e != 0.0) return false;
  }
  const auto as_floats = [](const Dense& d) { return std::vector<float>(d.v.begin(), d.v.end()); };
  const auto hs = static_cast<std::size_t>(h);
  auto w_ih = std::make_shared<const std::vector<float>>(torch_gru_order(as_floats(*w), hs, static_cast<std::size_t>(feat)));
  auto w_hh = std::make_shared<const std::vector<float>>(torch_gru_order(as_floats(*r), hs, hs));
  const auto b_ih = torch_gru_order(std::vector<float>(b.begin(), b.begin() + 3 * h), hs, 1);
  auto b_hh = std::make_shared<const std::vector<float>>(torch_gru_order(std::vector<float>(b.begin() + 3 * h, b.end()), hs, 1));

  const std::string base = op_name(n);
  int step = 0;  // ops added, for their names
  const auto add = [&](Op op, const char* what) {
    op.name = base + "." + what + "." + std::to_string(step++);
    return add_op(std::move(op), "", where(n));  // named outputs are set below
  };
  const auto reshape = [&](int of, std::vector<int64_t> shape, bool copy = false) {
    Op op;
    op.kind = OpKind::Reshape;
    op.inputs = {of};
    op.shape = std::move(shape);
    op.attrs.edit().copy = copy;
    return add(std::move(op), copy ? "clone" : "reshape");
  };
  const auto slice = [&](int of, int64_t axis, int64_t start, int64_t end) {
    Op op;
    op.kind = OpKind::Slice;
    op.inputs = {of};
    op.attrs.edit().axis = axis;
    op.attrs.edit().start = start;
    op.attrs.edit().end = end;
    return add(std::move(op), "slice");
  };
  const auto pointwise = [&](pw::Fn fn, std::vector<int> inputs, const char* what, uint64_t aux = 0) {
    Op op;
    op.kind = OpKind::Pointwise;
    op.attrs.edit().fn = static_cast<uint8_t>(fn);
    pw::attr_defaults(fn, op.attrs.edit().alpha, op.attrs.edit().beta);
    op.inputs = std::move(inputs);
    op.aux_bytes = aux;
    return add(std::move(op), what);
  };
  // fn(constant, x) with the constant at operand 0: a piece of b_hh (learned,
  // broadcast over the batch) or zeros of x's shape.
  const auto with_constant = [&](pw::Fn fn, int of, std::vector<int64_t> const_shape, std::vector<float> values, bool learned,
                                 const char* what, uint64_t aux) {
    Op op;
    op.kind = OpKind::Pointwise;
    op.attrs.edit().fn = static_cast<uint8_t>(fn);
    pw::attr_defaults(fn, op.attrs.edit().alpha, op.attrs.edit().beta);
    op.inputs = {of};
    op.attrs.edit().const_at = 0;
    op.attrs.edit().const_shape = std::move(const_shape);
    op.attrs.edit().learned = learned;
    op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(std::move(values))};
    op.aux_bytes = aux;
    return add(std::move(op), what);
  };
  const auto simple = [&](OpKind k, std::vector<int> inputs, const char* what) {
    Op op;
    op.kind = k;
    op.inputs = std::move(inputs);
    return add(std::move(op), what);
  };
  const uint64_t state_bytes = static_cast<uint64_t>(batch * h) * 4;
  const auto b_hh_piece = [&](int k) {
    return std::vector<float>(b_hh->begin() + static_cast<std::ptrdiff_t>(k * h), b_hh->begin() + static_cast<std::ptrdiff_t>((k + 1) * h));
  };

  // The input's gates of every step: (T·B, I) · W_ihᵀ + b_ih, as (T, B, 3H).
  // PyTorch copies a strided input (batch_first's transpose) dense first.
  int xs = x;
  if (in.strides->size() && !is_contiguous(in.shape, *in.strides)) xs = reshape(x, in.shape, true);
  Op ih;
  ih.kind = OpKind::Linear;
  ih.inputs = {reshape(xs, {t_len * batch, feat})};
  ih.shape = {t_len * batch, 3 * h};
  ih.attrs.edit().bias = false;
  ih.param_init = {w_ih};
  const int igates_flat = add(std::move(ih), "linear");
  Op bias;
  bias.kind = OpKind::AddConst;
  bias.inputs = {reshape(igates_flat, {t_len, batch, 3 * h})};
  bias.attrs.edit().const_shape = {3 * h};
  bias.attrs.edit().learned = true;
  bias.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(b_ih)};
  const int igates = add(std::move(bias), "addconst");

  std::vector<int> hs_out;
  int h_prev = -1;
  for (int64_t t = 0; t < t_len; ++t) {
    const int ig = reshape(slice(igates, 0, t, t + 1), {batch, 3 * h});
    int i_g[3];
    for (int k = 0; k < 3; ++k) i_g[k] = slice(ig, 1, k * h, (k + 1) * h);
    int r_g, z_g, rn;
    if (t == 0) {
      // W_hh · 0 + b_hh: b_hh's thirds broadcast; addmm keeps the zero state
      // (aux of the first add). b_hn·r is mul_ in place on b_hn's broadcast:
      // autograd keeps its clone, and the broadcast's storage stays with r's
      // and z's saves (two thirds of aux on the mul).
      r_g = pointwise(pw::Fn::Sigmoid, {with_constant(pw::Fn::Add, i_g[0], {h}, b_hh_piece(0), true, "add", state_bytes)}, "sigmoid");
      z_g = pointwise(pw::Fn::Sigmoid, {with_constant(pw::Fn::Add, i_g[1], {h}, b_hh_piece(1), true, "add", 0)}, "sigmoid");
      rn = with_constant(pw::Fn::Mul, r_g, {h}, b_hh_piece(2), true, "mul", 2 * state_bytes);
    } else {
      Op hh;
      hh.kind = OpKind::Linear;
      hh.inputs = {h_prev};
      hh.shape = {batch, 3 * h};
      hh.param_init = {w_hh, b_hh};
      const int hg = add(std::move(hh), "linear");
      int h_g[3];
      for (int k = 0; k < 3; ++k) h_g[k] = slice(hg, 1, k * h, (k + 1) * h);
      r_g = pointwise(pw::Fn::Sigmoid, {pointwise(pw::Fn::Add, {h_g[0], i_g[0]}, "add")}, "sigmoid");
      z_g = pointwise(pw::Fn::Sigmoid, {pointwise(pw::Fn::Add, {h_g[1], i_g[1]}, "add")}, "sigmoid");
      // h_n · r in place: autograd's clone of h_n (a dense copy, kept), and
      // the third of the Linear's storage the product overwrites (aux).
      rn = pointwise(pw::Fn::Mul, {reshape(h_g[2], {batch, h}, true), r_g}, "mul", state_bytes);
    }
    const int n_g = simple(OpKind::Tanh, {pointwise(pw::Fn::Add, {i_g[2], rn}, "add")}, "tanh");
    const int d = t == 0 ? with_constant(pw::Fn::Sub, n_g, {batch, h}, std::vector<float>(static_cast<std::size_t>(batch * h), 0.0f),
                                         false, "sub", 0)
                         : pointwise(pw::Fn::Sub, {h_prev, n_g}, "sub");
    h_prev = simple(OpKind::Add, {pointwise(pw::Fn::Mul, {d, z_g}, "mul"), n_g}, "add");
    hs_out.push_back(h_prev);
  }
  // Y (T, 1, B, H): the steps' h stacked; Y_h (1, B, H): the last one.
  // Only what the graph reads is added (every op must reach the loss).
  const auto read = [&](int k) {
    return n.output_size() > k && !n.output(k).empty() && (consumers_.count(n.output(k)) || n.output(k) == output_);
  };
  if (read(0)) {
    Op cat;
    cat.kind = OpKind::Concat;
    for (const int hv : hs_out) cat.inputs.push_back(reshape(hv, {1, batch, h}));
    cat.attrs.edit().axis = 0;
    values_[n.output(0)] = {Value::Activation, reshape(add(std::move(cat), "stack"), {t_len, 1, batch, h}), nullptr};
  }
  if (read(1)) values_[n.output(1)] = {Value::Activation, reshape(h_prev, {1, batch, h}), nullptr};
  return true;
}

}  // namespace remat::onnx_import
#endif
