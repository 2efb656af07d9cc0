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

#include "core/io/onnx_rnn_layer.h"

namespace remat::onnx_import {

namespace {

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
  if (attr_int(n, "input_forget", 0) != 0) return false;
  // torch gate k (i, f, g, o) is ONNX's from[k] (i, o, f, c); initial_h and
  // initial_c zero; no sequence_lens or peepholes.
  RnnLayer l(*this, n, x, {0, 2, 3, 1}, {"Sigmoid", "Tanh", "Tanh"}, {5, 6}, {4, 7});
  if (!l.ok()) return false;
  const int64_t t_len = l.t_len, batch = l.batch, feat = l.feat, h = l.h;
  const uint64_t state_bytes = l.state_bytes();

  const int igates = l.input_gates();

  std::vector<int> hs_out;
  int h_prev = -1, c_prev = -1;
  int first_pointwise = -1;  // step 0's b_hh add
  for (int64_t t = 0; t < t_len; ++t) {
    const int ig = l.reshape(l.slice(igates, 0, t, t + 1), {batch, 4 * h});
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
      op.attrs.edit().values = ConstValues{l.b_hh};
      op.aux_bytes = state_bytes;
      gates = first_pointwise = l.add(std::move(op), "add");
    } else {
      Op hh;
      hh.kind = OpKind::Linear;
      hh.inputs = {h_prev};
      hh.shape = {batch, 4 * h};
      hh.param_init = {l.w_hh, l.b_hh};
      gates = l.simple(OpKind::Add, {l.add(std::move(hh), "linear"), ig}, "add");
    }
    int g[4];
    for (int k = 0; k < 4; ++k) g[k] = l.slice(gates, 1, k * h, (k + 1) * h);
    const int i_g = l.pointwise(pw::Fn::Sigmoid, {g[0]}, "sigmoid");
    const int f_g = l.pointwise(pw::Fn::Sigmoid, {g[1]}, "sigmoid");
    const int c_g = l.pointwise(pw::Fn::Tanh, {g[2]}, "tanh");
    const int o_g = l.pointwise(pw::Fn::Sigmoid, {g[3]}, "sigmoid");
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
      fc = l.add(std::move(op), "mul");
    } else {
      fc = l.pointwise(pw::Fn::Mul, {f_g, c_prev}, "mul");
    }
    c_prev = l.simple(OpKind::Add, {fc, l.pointwise(pw::Fn::Mul, {i_g, c_g}, "mul")}, "add");
    h_prev = l.pointwise(pw::Fn::Mul, {o_g, l.simple(OpKind::Tanh, {c_prev}, "tanh")}, "mul");
    hs_out.push_back(h_prev);
  }
  // Y (T, 1, B, H): the steps' h stacked; Y_h, Y_c (1, B, H): the last ones.
  // Only what the graph reads is added (every op must reach the loss).
  const bool torch2 = torch_major_ >= 2;
  const auto keep_own_output = [&](int v) { model_.mutable_op(v).saved.push_back(v); };
  if (l.reads(0)) {
    const int stacked = l.stack(hs_out);
    if (torch2) keep_own_output(stacked);
    l.set_output(0, stacked, {t_len, 1, batch, h});
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
    if (!l.has_bias()) extra += static_cast<uint64_t>(4 * h * (feat + h)) * 4;  // zero biases shaped like W_ih, W_hh
    if (!l.reads(0)) extra += steps * cell;
    model_.mutable_op(first_pointwise).aux_bytes += extra;
  }
  if (l.reads(1)) l.set_output(1, h_prev, {1, batch, h});
  if (l.reads(2)) l.set_output(2, c_prev, {1, batch, h});
  return true;
}

}  // namespace remat::onnx_import
#endif
