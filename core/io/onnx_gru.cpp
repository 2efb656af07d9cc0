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

#include "core/io/onnx_rnn_layer.h"

namespace remat::onnx_import {

bool Importer::gru(const NodeProto& n, int x) {
  if (attr_int(n, "linear_before_reset", 0) != 1) return false;
  // torch gate k (r, z, n) is ONNX's from[k] (z, r, h); initial_h zero; no sequence_lens.
  RnnLayer l(*this, n, x, {1, 0, 2}, {"Sigmoid", "Tanh"}, {5}, {4});
  if (!l.ok()) return false;
  const int64_t t_len = l.t_len, batch = l.batch, h = l.h;
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
    return l.add(std::move(op), what);
  };
  const uint64_t state_bytes = l.state_bytes();
  const auto b_hh_piece = [&](int k) {
    return std::vector<float>(l.b_hh->begin() + static_cast<std::ptrdiff_t>(k * h), l.b_hh->begin() + static_cast<std::ptrdiff_t>((k + 1) * h));
  };

  const int igates = l.input_gates();

  std::vector<int> hs_out;
  int h_prev = -1;
  for (int64_t t = 0; t < t_len; ++t) {
    const int ig = l.reshape(l.slice(igates, 0, t, t + 1), {batch, 3 * h});
    int i_g[3];
    for (int k = 0; k < 3; ++k) i_g[k] = l.slice(ig, 1, k * h, (k + 1) * h);
    int r_g, z_g, rn;
    if (t == 0) {
      // W_hh · 0 + b_hh: b_hh's thirds broadcast; addmm keeps the zero state
      // (aux of the first add). b_hn·r is mul_ in place on b_hn's broadcast:
      // autograd keeps its clone, and the broadcast's storage stays with r's
      // and z's saves (two thirds of aux on the mul).
      r_g = l.pointwise(pw::Fn::Sigmoid, {with_constant(pw::Fn::Add, i_g[0], {h}, b_hh_piece(0), true, "add", state_bytes)}, "sigmoid");
      z_g = l.pointwise(pw::Fn::Sigmoid, {with_constant(pw::Fn::Add, i_g[1], {h}, b_hh_piece(1), true, "add", 0)}, "sigmoid");
      rn = with_constant(pw::Fn::Mul, r_g, {h}, b_hh_piece(2), true, "mul", 2 * state_bytes);
    } else {
      Op hh;
      hh.kind = OpKind::Linear;
      hh.inputs = {h_prev};
      hh.shape = {batch, 3 * h};
      hh.param_init = {l.w_hh, l.b_hh};
      const int hg = l.add(std::move(hh), "linear");
      int h_g[3];
      for (int k = 0; k < 3; ++k) h_g[k] = l.slice(hg, 1, k * h, (k + 1) * h);
      r_g = l.pointwise(pw::Fn::Sigmoid, {l.pointwise(pw::Fn::Add, {h_g[0], i_g[0]}, "add")}, "sigmoid");
      z_g = l.pointwise(pw::Fn::Sigmoid, {l.pointwise(pw::Fn::Add, {h_g[1], i_g[1]}, "add")}, "sigmoid");
      // h_n · r in place: autograd's clone of h_n (a dense copy, kept), and
      // the third of the Linear's storage the product overwrites (aux).
      rn = l.pointwise(pw::Fn::Mul, {l.reshape(h_g[2], {batch, h}, true), r_g}, "mul", state_bytes);
    }
    const int n_g = l.simple(OpKind::Tanh, {l.pointwise(pw::Fn::Add, {i_g[2], rn}, "add")}, "tanh");
    const int d = t == 0 ? with_constant(pw::Fn::Sub, n_g, {batch, h}, std::vector<float>(static_cast<std::size_t>(batch * h), 0.0f),
                                         false, "sub", 0)
                         : l.pointwise(pw::Fn::Sub, {h_prev, n_g}, "sub");
    h_prev = l.simple(OpKind::Add, {l.pointwise(pw::Fn::Mul, {d, z_g}, "mul"), n_g}, "add");
    hs_out.push_back(h_prev);
  }
  // Y (T, 1, B, H): the steps' h stacked; Y_h (1, B, H): the last one.
  // Only what the graph reads is added (every op must reach the loss).
  if (l.reads(0)) l.set_output(0, l.stack(hs_out), {t_len, 1, batch, h});
  if (l.reads(1)) l.set_output(1, h_prev, {1, batch, h});
  return true;
}

}  // namespace remat::onnx_import
#endif
