// ONNX LSTM as the ops PyTorch's CPU LSTM runs, which remat_capture records
// for nn.LSTM (docs/pytorch.md): the input's gates for every step by one
// Linear and its bias, then per step the hidden state's Linear (the first
// step's, of the zero initial state, is its bias alone), the Add of the
// input's gates, four Slices of the gates, sigmoid/tanh of each, c = f·c +
// i·g, h = o·tanh(c), and the steps' h stacked. The gates are put in
// PyTorch's order (i, f, g, o; ONNX's is i, o, f, c), so every weight is the
// tensor nn.LSTM holds. Each step's hidden Linear holds its own copy of W_hh
// and b_hh, as a capture's ops do: one step's gradients of the copies sum to
// the shared weight's. Returns false (the node stays Generic) for what this
// does not take: bidirectional, a sequence_lens or peephole input, other
// activations, a clip, layout 1, or an initial state that is not zero.
//
// A file PyTorch 2.x exported (producer_version) gets 2.x's saved bytes, as
// remat_capture gives its mkldnn_rnn_layer (python/remat_capture/_rnn.py):
// 2.x runs the layer as one oneDNN call whose node keeps the input, Y, h_n,
// c_n, the zero h0 and c0, zero weight-shaped biases when the layer has none,
// and oneDNN's workspace. The ops here keep the input, and instead of the
// workspace each step's gates, tanh(c), c_prev and h_prev: those are its
// contents in remat's layout, so the rest of it is the aux of the layer's
// first Pointwise op (step 0's b_hh add), and Y, h_n and c_n are kept by the
// ops making them.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <memory>

#include "core/io/onnx_importer.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/op_layout.h"

namespace remat::onnx_import {

namespace {

// ONNX's gate blocks (i, o, f, c) of `rows` rows each, as PyTorch's (i, f, g, o).
std::vector<float> torch_gate_order(const std::vector<float>& v, std::size_t rows_per_gate, std::size_t cols) {
  static constexpr int kFrom[4] = {0, 2, 3, 1};  // torch gate k is ONNX gate kFrom[k]
  const std::size_t block = rows_per_gate * cols;
  std::vector<float> out(v.size());
  for (int k = 0; k < 4; ++k)
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(kFrom[k] * block), v.begin() + static_cast<std::ptrdiff_t>((kFrom[k] + 1) * block),
              out.begin() + static_cast<std::ptrdiff_t>(k * block));
  return out;
}

// oneDNN's training workspace for one forward f32 LSTM layer of `t` steps,
// batch `b`, input `i`, hidden `h`, as PyTorch 2.6 (oneDNN 3.6) allocates it
// for mkldnn_rnn_layer: each of its buffers starts on a 4 KiB page (oneDNN's
// rnn_utils set_offsets): the gates (t·b rows of 4h, padded), h (t·b of h),
// five of the states' layout ((t+1)·b·2 rows of max(i, h)) and two of c's
// ((t+1)·b·2 rows of h). Rows are padded to 64 bytes, and by 64 more when a
// multiple of 1 KiB (oneDNN's get_good_ld). It gives the 40,960 and 36,864
// bytes _rnn.py names and what PyTorch 2.6 allocated for 11 shapes from
// 1 × 1 × 1 × 1 to 20 × 8 × 64 × 128 (docs/model-format.md).
uint64_t onednn_lstm_workspace(uint64_t t, uint64_t b, uint64_t i, uint64_t h) {
  const auto ld = [](uint64_t d) {
    const uint64_t r = (d + 15) / 16 * 16;
    return r % 256 == 0 ? r + 16 : r;
  };
  const auto page = [](uint64_t bytes) { return (bytes + 4095) / 4096 * 4096; };
  const uint64_t states = 2 * (t + 1) * b;
  return page(t * b * ld(4 * h) * 4) + page(t * b * ld(h) * 4) + 5 * page(states * ld(std::max(i, h)) * 4) +
         2 * page(states * h * 4);
}

}  // namespace

bool Importer::lstm(const NodeProto& n, int x) {
  const Op& in = model_.op(x);
  if (activation(n.input(0)) != x || in.shape.size() != 3 || in.dtype != DType::F32) return false;
  const int64_t t_len = in.shape[0], batch = in.shape[1], feat = in.shape[2];
  const int64_t h = attr_int(n, "hidden_size", 0);
  if (h <= 0 || h > (int64_t{1} << 20) || t_len * batch > (int64_t{1} << 24) || attr_int(n, "layout", 0) != 0 || attr_int(n, "input_forget", 0) != 0) return false;
  for (const auto& a : n.attribute()) {
    if (a.name() == "clip") return false;
    if (a.name() == "direction" && a.s() != "forward") return false;
    if (a.name() == "activations") {
      const char* want[3] = {"Sigmoid", "Tanh", "Tanh"};
      if (a.strings_size() != 3) return false;
      for (int k = 0; k < 3; ++k)
        if (a.strings(k) != want[k]) return false;
    }
  }
  const auto input = [&](int k) -> std::string { return n.input_size() > k ? n.input(k) : std::string(); };
  if (!input(4).empty() || !input(7).empty()) return false;  // sequence_lens, peepholes
  const auto w = dense_now(input(1)), r = dense_now(input(2));
  if (!w || !r || w->v.size() != static_cast<std::size_t>(4 * h * feat) || r->v.size() != static_cast<std::size_t>(4 * h * h))
    return false;
  std::vector<float> b(static_cast<std::size_t>(8 * h), 0.0f);
  if (!input(3).empty()) {
    const auto bd = dense_now(input(3));
    if (!bd || bd->v.size() != b.size()) return false;
    b.assign(bd->v.begin(), bd->v.end());
  }
  for (int k : {5, 6}) {  // initial_h, initial_c: absent or zero
    if (input(k).empty()) continue;
    const auto s = dense_now(input(k));
    if (!s || s->v.size() != static_cast<std::size_t>(batch * h)) return false;
    for (const double e : s->v)
      if (e != 0.0) return false;
  }
  const auto as_floats = [](const Dense& d) { return std::vector<float>(d.v.begin(), d.v.end()); };
  const auto hs = static_cast<std::size_t>(h);
  auto w_ih = std::make_shared<const std::vector<float>>(torch_gate_order(as_floats(*w), hs, static_cast<std::size_t>(feat)));
  auto w_hh = std::make_shared<const std::vector<float>>(torch_gate_order(as_floats(*r), hs, hs));
  const auto b_ih = torch_gate_order(std::vector<float>(b.begin(), b.begin() + 4 * h), hs, 1);
  auto b_hh = std::make_shared<const std::vector<float>>(torch_gate_order(std::vector<float>(b.begin() + 4 * h, b.end()), hs, 1));

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
  const auto pointwise = [&](pw::Fn fn, std::vector<int> inputs, const char* what) {
    Op op;
    op.kind = OpKind::Pointwise;
    op.attrs.edit().fn = static_cast<uint8_t>(fn);
    pw::attr_defaults(fn, op.attrs.edit().alpha, op.attrs.edit().beta);
    op.inputs = std::move(inputs);
    return add(std::move(op), what);
  };
  const auto simple = [&](OpKind k, std::vector<int> inputs, const char* what) {
    Op op;
    op.kind = k;
    op.inputs = std::move(inputs);
    return add(std::move(op), what);
  };
  const uint64_t state_bytes = static_cast<uint64_t>(batch * h) * 4;

  // The input's gates of every step: (T·B, I) · W_ihᵀ + b_ih, as (T, B, 4H).
  // PyTorch copies a strided input (batch_first's transpose) dense first.
  int xs = x;
  if (in.strides->size() && !is_contiguous(in.shape, *in.strides)) xs = reshape(x, in.shape, true);
  Op ih;
  ih.kind = OpKind::Linear;
  ih.inputs = {reshape(xs, {t_len * batch, feat})};
  ih.shape = {t_len * batch, 4 * h};
  ih.attrs.edit().bias = false;
  ih.param_init = {w_ih};
  const int igates_flat = add(std::move(ih), "linear");
  Op bias;
  bias.kind = OpKind::AddConst;
  bias.inputs = {reshape(igates_flat, {t_len, batch, 4 * h})};
  bias.attrs.edit().const_shape = {4 * h};
  bias.attrs.edit().learned = true;
  bias.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(b_ih)};
  const int igates = add(std::move(bias), "addconst");

  std::vector<int> hs_out;
  int h_prev = -1, c_prev = -1;
  int first_pointwise = -1;  // step 0's b_hh add
  for (int64_t t = 0; t < t_len; ++t) {
    const int ig = reshape(slice(igates, 0, t, t + 1), {batch, 4 * h});
    int gates;
    if (t == 0) {
      // W_hh · 0 + b_hh: the bias broadcast onto the input's gates; addmm
      // keeps the zero state for W_hh's gradient (aux).
      Op op;
      op.kind = OpKind::Pointwise;
      op.attrs.edit().fn = static_cast<uint8_t>(pw::Fn::Add);
      op.inputs = {ig};
      op.attrs.edit().const_at = 0;
      op.attrs.edit().const_shape = {4 * h};
      op.attrs.edit().learned = true;
      op.attrs.edit().values = ConstValues{b_hh};
      op.aux_bytes = state_bytes;
      gates = first_pointwise = add(std::move(op), "add");
    } else {
      Op hh;
      hh.kind = OpKind::Linear;
      hh.inputs = {h_prev};
      hh.shape = {batch, 4 * h};
      hh.param_init = {w_hh, b_hh};
      gates = simple(OpKind::Add, {add(std::move(hh), "linear"), ig}, "add");
    }
    int g[4];
    for (int k = 0; k < 4; ++k) g[k] = slice(gates, 1, k * h, (k + 1) * h);
    const int i_g = pointwise(pw::Fn::Sigmoid, {g[0]}, "sigmoid");
    const int f_g = pointwise(pw::Fn::Sigmoid, {g[1]}, "sigmoid");
    const int c_g = pointwise(pw::Fn::Tanh, {g[2]}, "tanh");
    const int o_g = pointwise(pw::Fn::Sigmoid, {g[3]}, "sigmoid");
    int fc;
    if (t == 0) {  // f · c0 with c0 zero: the mul keeps the zero state (aux)
      Op op;
      op.kind = OpKind::Pointwise;
      op.attrs.edit().fn = static_cast<uint8_t>(pw::Fn::Mul);
      op.inputs = {f_g};
      op.attrs.edit().const_at = 1;
      op.attrs.edit().const_shape = {batch, h};
      op.attrs.edit().values = ConstValues{std::make_shared<const std::vector<float>>(static_cast<std::size_t>(batch * h), 0.0f)};
      op.aux_bytes = state_bytes;
      fc = add(std::move(op), "mul");
    } else {
      fc = pointwise(pw::Fn::Mul, {f_g, c_prev}, "mul");
    }
    c_prev = simple(OpKind::Add, {fc, pointwise(pw::Fn::Mul, {i_g, c_g}, "mul")}, "add");
    h_prev = pointwise(pw::Fn::Mul, {o_g, simple(OpKind::Tanh, {c_prev}, "tanh")}, "mul");
    hs_out.push_back(h_prev);
  }
  // Y (T, 1, B, H): the steps' h stacked; Y_h, Y_c (1, B, H): the last ones.
  // Only what the graph reads is added (every op must reach the loss).
  const auto read = [&](int k) {
    return n.output_size() > k && !n.output(k).empty() && (consumers_.count(n.output(k)) || n.output(k) == output_);
  };
  const bool torch2 = torch_major_ >= 2;
  const auto keep_own_output = [&](int v) { model_.mutable_op(v).saved.push_back(v); };
  if (read(0)) {
    Op cat;
    cat.kind = OpKind::Concat;
    for (const int hv : hs_out) cat.inputs.push_back(reshape(hv, {1, batch, h}));
    cat.attrs.edit().axis = 0;
    const int stacked = add(std::move(cat), "stack");
    if (torch2) keep_own_output(stacked);
    values_[n.output(0)] = {Value::Activation, reshape(stacked, {t_len, 1, batch, h}), nullptr};
  }
  if (torch2) {
    // 2.x's saves (above). h0 and c0 are the aux of the ops reading them
    // already, as in 1.13. Y unread here is still kept by 2.x: private.
    keep_own_output(h_prev);
    keep_own_output(c_prev);
    const uint64_t cell = state_bytes, steps = static_cast<uint64_t>(t_len);
    const uint64_t own = steps * (4 + 1) * cell + (steps - 1) * 2 * cell;  // gates, tanh(c); c_prev, h_prev
    const uint64_t ws = onednn_lstm_workspace(steps, static_cast<uint64_t>(batch), static_cast<uint64_t>(feat), static_cast<uint64_t>(h));
    // ws > own always: the gates' buffer alone holds 4·T cells, the states' 10·(T+1).
    uint64_t extra = ws - own;
    if (input(3).empty()) extra += static_cast<uint64_t>(4 * h * (feat + h)) * 4;  // zero biases shaped like W_ih, W_hh
    if (!read(0)) extra += steps * cell;
    model_.mutable_op(first_pointwise).aux_bytes += extra;
  }
  if (read(1)) values_[n.output(1)] = {Value::Activation, reshape(h_prev, {1, batch, h}), nullptr};
  if (read(2)) values_[n.output(2)] = {Value::Activation, reshape(c_prev, {1, batch, h}), nullptr};
  return true;
}

}  // namespace remat::onnx_import
#endif
