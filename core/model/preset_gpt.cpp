// gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]: GPT-2 as nanoGPT writes it.
// Token ids -> token embedding + position table -> dropout; per block
//   x + Dropout(proj(attention(LN1(x)))), then x + Dropout(fc2(GELU(fc1(LN2(x)))))
// with causal attention written out as torch runs it: qkv Linear, split
// (three slices), view to heads, transpose, q @ k^T, scale, mask, softmax,
// dropout, @ v, transpose back, reshape (a copy: the transposed tensor is not
// contiguous), projection. Then the final LayerNorm, the vocabulary
// projection (no bias; GPT-2 ties it to the token embedding, counted here as
// separate parameters) and cross-entropy.
#include <cmath>
#include <memory>

#include "core/base/errors.h"
#include "core/model/preset_models.h"

namespace remat {

Model gpt_preset(const std::vector<std::string>& f, const std::string& spec) {
  if (f.size() < 2 || f.size() > 8)
    throw InputError("model spec '" + spec + "': expected gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]");
  auto field = [&](std::size_t i, int64_t fallback, const char* what, int64_t hi) {
    return spec_field(f, i, fallback, what, hi, spec);
  };
  const int layers = static_cast<int>(field(1, 0, "block count L", 10'000));
  const int64_t d = field(2, 768, "width D", 1 << 16);
  const int64_t heads = field(3, 12, "head count H", 1 << 10);
  const int64_t seq = field(4, 1024, "SEQ", 1 << 20);
  const int64_t batch = field(5, 1, "BATCH", 1 << 16);
  const PresetPrecision precision = spec_precision(f, 6, spec);
  const DType dtype = precision.dtype;
  const int64_t vocab = field(7, 50257, "VOCAB", 1 << 24);
  if (d % heads != 0)
    throw InputError("model spec '" + spec + "': width D " + std::to_string(d) + " is not a multiple of the head count " + std::to_string(heads));
  const int64_t hs = d / heads;
  constexpr float kDropout = 0.1f;

  Model m;
  m.name = spec;
  auto add = [&](OpKind k, std::string name, std::vector<int> in, std::vector<int64_t> shape = {}) {
    Op op;
    op.kind = k;
    op.name = std::move(name);
    op.inputs = std::move(in);
    op.shape = std::move(shape);
    op.dtype = dtype;
    if (k == OpKind::Dropout) op.dropout_p = kDropout;
    return op;
  };
  auto put = [&](Op op) {
    precision.apply(op, m);
    return m.add(std::move(op));
  };
  auto slice = [&](const std::string& name, int x, int64_t start) {
    Op op = add(OpKind::Slice, name, {x});
    op.attrs.edit().axis = 2;
    op.attrs.edit().start = start;
    op.attrs.edit().end = start + d;
    return put(std::move(op));
  };
  auto transpose = [&](const std::string& name, int x, std::vector<int64_t> perm) {
    Op op = add(OpKind::Transpose, name, {x});
    op.attrs.edit().perm = std::move(perm);
    return put(std::move(op));
  };
  auto linear = [&](const std::string& name, int x, int64_t out, bool bias = true) {
    Op op = add(OpKind::Linear, name, {x}, {batch, seq, out});
    if (!bias) op.attrs.edit().bias = false;  // the default holds nothing
    return put(std::move(op));
  };

  Op ids = add(OpKind::Input, "ids", {}, {batch, seq});
  ids.dtype = DType::I64;
  int x = put(std::move(ids));
  Op wte = add(OpKind::Embedding, "wte", {x}, {batch, seq, d});
  wte.attrs.edit().vocab = vocab;
  x = put(std::move(wte));
  Op wpe = add(OpKind::AddConst, "wpe", {x});  // + the learned position table's first SEQ rows
  wpe.attrs.edit().const_shape = {seq, d};
  wpe.attrs.edit().learned = true;
  x = put(std::move(wpe));
  // The constants every block shares: attention's scale and the causal mask.
  const ConstValues scale_value{std::make_shared<const std::vector<float>>(1, 1.0f / std::sqrt(static_cast<float>(hs)))};
  const ConstValues causal_mask = causal_mask_values(seq);
  x = put(add(OpKind::Dropout, "drop", {x}));
  for (int b = 0; b < layers; ++b) {
    const std::string p = "h" + std::to_string(b) + ".";
    int h = put(add(OpKind::LayerNorm, p + "ln_1", {x}));
    const int qkv = linear(p + "attn.c_attn", h, 3 * d);
    const std::vector<int64_t> heads4 = {batch, seq, heads, hs};
    const int q = transpose(p + "attn.q", put(add(OpKind::Reshape, p + "attn.q.view", {slice(p + "attn.q.split", qkv, 0)}, heads4)), {0, 2, 1, 3});
    const int k = transpose(p + "attn.kT", put(add(OpKind::Reshape, p + "attn.k.view", {slice(p + "attn.k.split", qkv, d)}, heads4)), {0, 2, 3, 1});
    const int v = transpose(p + "attn.v", put(add(OpKind::Reshape, p + "attn.v.view", {slice(p + "attn.v.split", qkv, 2 * d)}, heads4)), {0, 2, 1, 3});
    int a = put(add(OpKind::MatMul, p + "attn.q@kT", {q, k}));
    Op scale = add(OpKind::MulConst, p + "attn.scale", {a});  // 1/sqrt(head size)
    scale.attrs.edit().values = scale_value;
    a = put(std::move(scale));
    Op mask = add(OpKind::MaskedFill, p + "attn.mask", {a});  // -inf above the diagonal
    mask.attrs.edit().const_shape = {1, 1, seq, seq};
    mask.attrs.edit().values = causal_mask;
    a = put(std::move(mask));
    Op sm = add(OpKind::Softmax, p + "attn.softmax", {a});
    sm.attrs.edit().axis = -1;
    a = put(std::move(sm));
    a = put(add(OpKind::Dropout, p + "attn.attn_dropout", {a}));
    int y = put(add(OpKind::MatMul, p + "attn.@v", {a, v}));
    y = transpose(p + "attn.y.transpose", y, {0, 2, 1, 3});
    y = put(add(OpKind::Reshape, p + "attn.y.view", {y}, {batch, seq, d}));
    y = linear(p + "attn.c_proj", y, d);
    y = put(add(OpKind::Dropout, p + "attn.resid_dropout", {y}));
    x = put(add(OpKind::Add, p + "res1", {x, y}));
    h = put(add(OpKind::LayerNorm, p + "ln_2", {x}));
    h = linear(p + "mlp.c_fc", h, 4 * d);
    h = put(add(OpKind::GELU, p + "mlp.gelu", {h}));
    h = linear(p + "mlp.c_proj", h, d);
    h = put(add(OpKind::Dropout, p + "mlp.dropout", {h}));
    x = put(add(OpKind::Add, p + "res2", {x, h}));
  }
  x = put(add(OpKind::LayerNorm, "ln_f", {x}));
  x = linear("lm_head", x, vocab, false);
  put(add(OpKind::SoftmaxCELoss, "loss", {x}));
  m.finalize();
  return m;
}

}  // namespace remat
