#include "core/parallel/rank_model.h"

#include <cmath>
#include <memory>

#include "core/base/errors.h"
#include "core/base/spec_parse.h"
#include "core/model/preset_models.h"

namespace remat {

GptShape parse_gpt_shape(const std::string& spec) {
  const std::vector<std::string> f = split(spec, ':');
  if (f.empty() || f[0] != "gpt")
    throw InputError("--parallel: model '" + spec +
                     "' is not a gpt: preset; only gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]] has the attention heads "
                     "and MLPs Megatron's split divides");
  if (f.size() < 2 || f.size() > 8) throw InputError("model spec '" + spec + "': expected gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]");
  GptShape g;
  g.spec = spec;
  g.layers = static_cast<int>(spec_field(f, 1, 0, "block count L", 10'000, spec));
  g.hidden = spec_field(f, 2, 768, "width D", 1 << 16, spec);
  g.heads = spec_field(f, 3, 12, "head count H", 1 << 10, spec);
  g.seq = spec_field(f, 4, 1024, "SEQ", 1 << 20, spec);
  g.batch = spec_field(f, 5, 1, "BATCH", 1 << 16, spec);
  g.dtype = spec_dtype(f, 6, spec);
  g.vocab = spec_field(f, 7, 50257, "VOCAB", 1 << 24, spec);
  if (g.hidden % g.heads != 0)
    throw InputError("model spec '" + spec + "': width D " + std::to_string(g.hidden) + " is not a multiple of the head count " +
                     std::to_string(g.heads));
  return g;
}

Model gpt_rank_model(const GptShape& g, const RankSlice& r) {
  const int64_t t = r.tp;
  auto need_divides = [&](int64_t n, const char* what) {
    if (n % t != 0)
      throw InputError("--parallel: tp=" + std::to_string(t) + " does not divide the " + what + " " + std::to_string(n) +
                       " of '" + g.spec + "'");
  };
  need_divides(g.heads, "head count");
  if (r.sp) need_divides(g.seq, "sequence length");
  if (r.blocks < 1 || r.first_block < 0 || r.first_block + r.blocks > g.layers)
    throw InputError("--parallel: blocks [" + std::to_string(r.first_block) + ", " + std::to_string(r.first_block + r.blocks) +
                     ") are not within the " + std::to_string(g.layers) + " of '" + g.spec + "'");
  const int64_t d = g.hidden, b = g.batch, s = g.seq;
  const int64_t dt = d / t, heads = g.heads / t, hs = d / g.heads;
  const int64_t s_local = r.sp ? s / t : s;  // the sequence a LayerNorm, dropout or residual holds
  // Megatron pads the vocabulary to a multiple of t; each rank holds its share.
  const int64_t vocab = (g.vocab + t - 1) / t;
  constexpr float kDropout = 0.1f;
  const bool whole = t == 1 && !r.sp && r.first_stage && r.last_stage && r.blocks == g.layers;

  Model m;
  m.name = whole ? g.spec
                 : g.spec + " rank (tp=" + std::to_string(t) + (r.sp ? ",sp" : "") + ", blocks " +
                       std::to_string(r.first_block) + ".." + std::to_string(r.first_block + r.blocks - 1) + ")";
  auto add = [&](OpKind k, std::string name, std::vector<int> in, std::vector<int64_t> shape = {}) {
    Op op;
    op.kind = k;
    op.name = std::move(name);
    op.inputs = std::move(in);
    op.shape = std::move(shape);
    op.dtype = g.dtype;
    if (k == OpKind::Dropout) op.dropout_p = kDropout;
    return op;
  };
  auto put = [&](Op op) { return m.add(std::move(op)); };
  auto slice = [&](const std::string& name, int x, int64_t start) {
    Op op = add(OpKind::Slice, name, {x});
    op.attrs.edit().axis = 2;
    op.attrs.edit().start = start;
    op.attrs.edit().end = start + dt;
    return put(std::move(op));
  };
  auto transpose = [&](const std::string& name, int x, std::vector<int64_t> perm) {
    Op op = add(OpKind::Transpose, name, {x});
    op.attrs.edit().perm = std::move(perm);
    return put(std::move(op));
  };
  auto linear = [&](const std::string& name, int x, int64_t out, bool bias = true) {
    Op op = add(OpKind::Linear, name, {x}, {b, s, out});
    if (!bias) op.attrs.edit().bias = false;
    return put(std::move(op));
  };
  // The communication of sequence parallelism, as Generic ops (no op kind of
  // their own: the memory model needs only their shapes and what they keep).
  // The all-gather keeps its shard: the Linear after it gathers it again in
  // its backward instead of keeping the full input (Korthikanti et al. 2022,
  // section 4.2.2), so that Linear keeps nothing.
  auto all_gather = [&](const std::string& name, int x) {
    Op op = add(OpKind::Generic, name, {x}, {b, s, d});
    op.saved = {x};
    return m.add(std::move(op), {}, true);
  };
  auto reduce_scatter = [&](const std::string& name, int x) {
    Op op = add(OpKind::Generic, name, {x}, {b, s_local, d});
    return m.add(std::move(op), {}, true);  // keeps nothing: its backward is an all-gather of the gradient
  };
  // A column-parallel Linear: under sp it reads the gathered input and keeps nothing.
  auto column = [&](const std::string& name, int x, int64_t out, bool bias = true) {
    if (!r.sp) return linear(name, x, out, bias);
    const int gathered = all_gather(name + ".all_gather", x);
    Op op = add(OpKind::Linear, name, {gathered}, {b, s, out});
    if (!bias) op.attrs.edit().bias = false;
    return m.add(std::move(op), {}, true);
  };
  // A row-parallel Linear: its output is the partial sum, all-reduced in place
  // (reduce-scattered to the sequence shard under sp).
  auto row = [&](const std::string& name, int x) {
    const int y = linear(name, x, d);
    return r.sp ? reduce_scatter(name + ".reduce_scatter", y) : y;
  };

  int x = 0;
  if (r.first_stage) {
    Op ids = add(OpKind::Input, "ids", {}, {b, s});
    ids.dtype = DType::I64;
    x = put(std::move(ids));
    Op wte = add(OpKind::Embedding, "wte", {x}, {b, s, d});
    wte.attrs.edit().vocab = vocab;
    x = put(std::move(wte));
    Op wpe = add(OpKind::AddConst, "wpe", {x});
    wpe.attrs.edit().const_shape = {s, d};
    wpe.attrs.edit().learned = true;
    x = put(std::move(wpe));
    if (r.sp) x = reduce_scatter("wte.reduce_scatter", x);
    x = put(add(OpKind::Dropout, "drop", {x}));
  } else {
    x = put(add(OpKind::Input, "recv", {}, {b, s_local, d}));  // the previous stage's output
  }
  const ConstValues scale_value{std::make_shared<const std::vector<float>>(1, 1.0f / std::sqrt(static_cast<float>(hs)))};
  const ConstValues causal_mask = causal_mask_values(s);
  for (int blk = r.first_block; blk < r.first_block + r.blocks; ++blk) {
    const std::string p = "h" + std::to_string(blk) + ".";
    int h = put(add(OpKind::LayerNorm, p + "ln_1", {x}));
    const int qkv = column(p + "attn.c_attn", h, 3 * dt);
    const std::vector<int64_t> heads4 = {b, s, heads, hs};
    const int q = transpose(p + "attn.q", put(add(OpKind::Reshape, p + "attn.q.view", {slice(p + "attn.q.split", qkv, 0)}, heads4)), {0, 2, 1, 3});
    const int k = transpose(p + "attn.kT", put(add(OpKind::Reshape, p + "attn.k.view", {slice(p + "attn.k.split", qkv, dt)}, heads4)), {0, 2, 3, 1});
    const int v = transpose(p + "attn.v", put(add(OpKind::Reshape, p + "attn.v.view", {slice(p + "attn.v.split", qkv, 2 * dt)}, heads4)), {0, 2, 1, 3});
    int a = put(add(OpKind::MatMul, p + "attn.q@kT", {q, k}));
    Op scale = add(OpKind::MulConst, p + "attn.scale", {a});
    scale.attrs.edit().values = scale_value;
    a = put(std::move(scale));
    Op mask = add(OpKind::MaskedFill, p + "attn.mask", {a});
    mask.attrs.edit().const_shape = {1, 1, s, s};
    mask.attrs.edit().values = causal_mask;
    a = put(std::move(mask));
    Op sm = add(OpKind::Softmax, p + "attn.softmax", {a});
    sm.attrs.edit().axis = -1;
    a = put(std::move(sm));
    a = put(add(OpKind::Dropout, p + "attn.attn_dropout", {a}));
    int y = put(add(OpKind::MatMul, p + "attn.@v", {a, v}));
    y = transpose(p + "attn.y.transpose", y, {0, 2, 1, 3});
    y = put(add(OpKind::Reshape, p + "attn.y.view", {y}, {b, s, dt}));
    y = row(p + "attn.c_proj", y);
    y = put(add(OpKind::Dropout, p + "attn.resid_dropout", {y}));
    x = put(add(OpKind::Add, p + "res1", {x, y}));
    h = put(add(OpKind::LayerNorm, p + "ln_2", {x}));
    h = column(p + "mlp.c_fc", h, 4 * dt);
    h = put(add(OpKind::GELU, p + "mlp.gelu", {h}));
    h = row(p + "mlp.c_proj", h);
    h = put(add(OpKind::Dropout, p + "mlp.dropout", {h}));
    x = put(add(OpKind::Add, p + "res2", {x, h}));
  }
  if (r.last_stage) {
    x = put(add(OpKind::LayerNorm, "ln_f", {x}));
    x = column("lm_head", x, vocab, false);  // no bias: GPT-2's
    put(add(OpKind::SoftmaxCELoss, "loss", {x}));
  } else {
    // The send to the next stage: one element, so that it adds nothing but
    // its 2 or 4 bytes; its backward makes G(x), the gradient received.
    Op send = add(OpKind::Generic, "send", {x}, {1});
    m.add(std::move(send), {}, true);
  }
  m.finalize();
  return m;
}

}  // namespace remat
