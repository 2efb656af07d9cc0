#include "core/parallel/rank_model.h"

#include <cmath>
#include <memory>

#include "core/base/errors.h"
#include "core/base/spec_parse.h"
#include "core/model/preset_models.h"

namespace remat {

StackShape parse_stack_shape(const std::string& spec) {
  const std::vector<std::string> f = split(spec, ':');
  StackShape g;
  g.spec = spec;
  if (!f.empty() && f[0] == "transformer") {
    if (f.size() < 2 || f.size() > 5) throw InputError("model spec '" + spec + "': expected transformer:L[:D[:SEQ[:BATCH]]]");
    g.family = StackShape::Family::Transformer;
    g.layers = static_cast<int>(spec_field(f, 1, 0, "block count L", 100'000, spec));
    g.hidden = spec_field(f, 2, 256, "width D", 1 << 16, spec);
    g.seq = spec_field(f, 3, 64, "SEQ", 1 << 20, spec);
    g.batch = spec_field(f, 4, 4, "BATCH", 1 << 16, spec);
    g.heads = 1;  // no attention: nothing to divide but the widths
    g.vocab = g.hidden;  // its head's classes
    return g;
  }
  if (f.empty() || f[0] != "gpt")
    throw InputError("--parallel: model '" + spec +
                     "' is neither a gpt: nor a transformer: preset; only their blocks are split into ranks yet "
                     "(gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]], transformer:L[:D[:SEQ[:BATCH]]])");
  if (f.size() < 2 || f.size() > 8) throw InputError("model spec '" + spec + "': expected gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]");
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

namespace {

constexpr float kDropout = 0.1f;

// What the two families share: ops of the model's dtype, and Megatron's
// column- and row-parallel Linears with sequence parallelism's communication
// around them. `lead` is the leading shape of an activation, (b, s) or
// (rows); `lead_local` the same where sequence parallelism shards it.
struct RankBuilder {
  Model& m;
  const RankSlice& r;
  DType dtype;
  std::vector<int64_t> lead, lead_local;
  int64_t width;  // h

  std::vector<int64_t> shape(const std::vector<int64_t>& l, int64_t last) const {
    std::vector<int64_t> s = l;
    s.push_back(last);
    return s;
  }
  Op op(OpKind k, std::string name, std::vector<int> in, std::vector<int64_t> shape = {}) const {
    Op o;
    o.kind = k;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.shape = std::move(shape);
    o.dtype = dtype;
    if (k == OpKind::Dropout) o.dropout_p = kDropout;
    return o;
  }
  int put(Op o) { return m.add(std::move(o)); }
  int add(OpKind k, std::string name, std::vector<int> in, std::vector<int64_t> s = {}) {
    return put(op(k, std::move(name), std::move(in), std::move(s)));
  }
  int linear(const std::string& name, int x, int64_t out, bool bias = true) {
    Op o = op(OpKind::Linear, name, {x}, shape(lead, out));
    if (!bias) o.attrs.edit().bias = false;  // the default holds nothing
    return put(std::move(o));
  }
  // Sequence parallelism's communication, as Generic ops (no op kind of
  // their own: the memory model needs only their shapes and what they keep).
  // The all-gather keeps its shard: the Linear after it gathers it again in
  // its backward instead of keeping the full input (Korthikanti et al. 2022,
  // section 4.2.2), so that Linear keeps nothing.
  int all_gather(const std::string& name, int x) {
    Op o = op(OpKind::Generic, name, {x}, shape(lead, width));
    o.saved = {x};
    return m.add(std::move(o), {}, true);
  }
  int reduce_scatter(const std::string& name, int x) {  // keeps nothing: its backward is an all-gather of the gradient
    return m.add(op(OpKind::Generic, name, {x}, shape(lead_local, width)), {}, true);
  }
  // A column-parallel Linear: under sp it reads the gathered input and keeps nothing.
  int column(const std::string& name, int x, int64_t out, bool bias = true) {
    if (!r.sp) return linear(name, x, out, bias);
    const int gathered = all_gather(name + ".all_gather", x);
    Op o = op(OpKind::Linear, name, {gathered}, shape(lead, out));
    if (!bias) o.attrs.edit().bias = false;
    return m.add(std::move(o), {}, true);
  }
  // A row-parallel Linear: its output is the partial sum, all-reduced in place
  // (reduce-scattered to the sequence shard under sp).
  int row(const std::string& name, int x) {
    const int y = linear(name, x, width);
    return r.sp ? reduce_scatter(name + ".reduce_scatter", y) : y;
  }
  // The stage's start when it is not the first: what the previous one sends.
  int recv() { return add(OpKind::Input, "recv", {}, shape(lead_local, width)); }
  // Its end when it is not the last: the send, one element, so that it adds
  // nothing but its 2 or 4 bytes; its backward makes G(x), the gradient received.
  void send(int x) { m.add(op(OpKind::Generic, "send", {x}, {1}), {}, true); }
};

void need_divides(const StackShape& g, int64_t t, int64_t n, const char* what) {
  if (n % t != 0)
    throw InputError("--parallel: tp=" + std::to_string(t) + " does not divide the " + what + " " + std::to_string(n) + " of '" +
                     g.spec + "'");
}

std::string rank_name(const StackShape& g, const RankSlice& r) {
  const bool whole = r.tp == 1 && !r.sp && r.first_stage && r.last_stage && r.blocks == g.layers;
  return whole ? g.spec
               : g.spec + " rank (tp=" + std::to_string(r.tp) + (r.sp ? ",sp" : "") + ", blocks " +
                     std::to_string(r.first_block) + ".." + std::to_string(r.first_block + r.blocks - 1) + ")";
}

// GPT-2 as core/model/preset_gpt.cpp writes it (see there for the ops).
void build_gpt(RankBuilder& k, const StackShape& g, const RankSlice& r) {
  const int64_t t = r.tp, d = g.hidden, b = g.batch, s = g.seq;
  const int64_t dt = d / t, heads = g.heads / t, hs = d / g.heads;
  const int64_t vocab = (g.vocab + t - 1) / t;  // Megatron pads the vocabulary to a multiple of t
  auto slice = [&](const std::string& name, int x, int64_t start) {
    Op op = k.op(OpKind::Slice, name, {x});
    op.attrs.edit().axis = 2;
    op.attrs.edit().start = start;
    op.attrs.edit().end = start + dt;
    return k.put(std::move(op));
  };
  auto transpose = [&](const std::string& name, int x, std::vector<int64_t> perm) {
    Op op = k.op(OpKind::Transpose, name, {x});
    op.attrs.edit().perm = std::move(perm);
    return k.put(std::move(op));
  };
  int x = 0;
  if (r.first_stage) {
    Op ids = k.op(OpKind::Input, "ids", {}, {b, s});
    ids.dtype = DType::I64;
    x = k.put(std::move(ids));
    Op wte = k.op(OpKind::Embedding, "wte", {x}, {b, s, d});
    wte.attrs.edit().vocab = vocab;
    x = k.put(std::move(wte));
    Op wpe = k.op(OpKind::AddConst, "wpe", {x});
    wpe.attrs.edit().const_shape = {s, d};
    wpe.attrs.edit().learned = true;
    x = k.put(std::move(wpe));
    if (r.sp) x = k.reduce_scatter("wte.reduce_scatter", x);
    x = k.add(OpKind::Dropout, "drop", {x});
  } else {
    x = k.recv();
  }
  const ConstValues scale_value{std::make_shared<const std::vector<float>>(1, 1.0f / std::sqrt(static_cast<float>(hs)))};
  const ConstValues causal_mask = causal_mask_values(s);
  for (int blk = r.first_block; blk < r.first_block + r.blocks; ++blk) {
    const std::string p = "h" + std::to_string(blk) + ".";
    int h = k.add(OpKind::LayerNorm, p + "ln_1", {x});
    const int qkv = k.column(p + "attn.c_attn", h, 3 * dt);
    const std::vector<int64_t> heads4 = {b, s, heads, hs};
    const int q = transpose(p + "attn.q", k.add(OpKind::Reshape, p + "attn.q.view", {slice(p + "attn.q.split", qkv, 0)}, heads4), {0, 2, 1, 3});
    const int kt = transpose(p + "attn.kT", k.add(OpKind::Reshape, p + "attn.k.view", {slice(p + "attn.k.split", qkv, dt)}, heads4), {0, 2, 3, 1});
    const int v = transpose(p + "attn.v", k.add(OpKind::Reshape, p + "attn.v.view", {slice(p + "attn.v.split", qkv, 2 * dt)}, heads4), {0, 2, 1, 3});
    int a = k.add(OpKind::MatMul, p + "attn.q@kT", {q, kt});
    Op scale = k.op(OpKind::MulConst, p + "attn.scale", {a});
    scale.attrs.edit().values = scale_value;
    a = k.put(std::move(scale));
    Op mask = k.op(OpKind::MaskedFill, p + "attn.mask", {a});
    mask.attrs.edit().const_shape = {1, 1, s, s};
    mask.attrs.edit().values = causal_mask;
    a = k.put(std::move(mask));
    Op sm = k.op(OpKind::Softmax, p + "attn.softmax", {a});
    sm.attrs.edit().axis = -1;
    a = k.put(std::move(sm));
    a = k.add(OpKind::Dropout, p + "attn.attn_dropout", {a});
    int y = k.add(OpKind::MatMul, p + "attn.@v", {a, v});
    y = transpose(p + "attn.y.transpose", y, {0, 2, 1, 3});
    y = k.add(OpKind::Reshape, p + "attn.y.view", {y}, {b, s, dt});
    y = k.row(p + "attn.c_proj", y);
    y = k.add(OpKind::Dropout, p + "attn.resid_dropout", {y});
    x = k.add(OpKind::Add, p + "res1", {x, y});
    h = k.add(OpKind::LayerNorm, p + "ln_2", {x});
    h = k.column(p + "mlp.c_fc", h, 4 * dt);
    h = k.add(OpKind::GELU, p + "mlp.gelu", {h});
    h = k.row(p + "mlp.c_proj", h);
    h = k.add(OpKind::Dropout, p + "mlp.dropout", {h});
    x = k.add(OpKind::Add, p + "res2", {x, h});
  }
  if (r.last_stage) {
    x = k.add(OpKind::LayerNorm, "ln_f", {x});
    x = k.column("lm_head", x, vocab, false);  // no bias: GPT-2's
    k.add(OpKind::SoftmaxCELoss, "loss", {x});
  } else {
    k.send(x);
  }
}

// The teaching transformer as core/model/presets.cpp writes it: per block
// LN -> Linear -> Tanh -> Linear -> Dropout (a token mixer without attention),
// then LN -> Linear(4h) -> GELU -> Linear -> Dropout, residual Adds.
void build_transformer(RankBuilder& k, const StackShape& g, const RankSlice& r) {
  const int64_t dt = g.hidden / r.tp;
  int x = r.first_stage ? k.add(OpKind::Input, "x", {}, k.shape(k.lead_local, g.hidden)) : k.recv();
  for (int blk = r.first_block; blk < r.first_block + r.blocks; ++blk) {
    const std::string p = "b" + std::to_string(blk) + ".";
    int h = k.add(OpKind::LayerNorm, p + "ln1", {x});
    h = k.column(p + "mix.in", h, dt);
    h = k.add(OpKind::Tanh, p + "mix.tanh", {h});
    h = k.row(p + "mix.out", h);
    h = k.add(OpKind::Dropout, p + "mix.drop", {h});
    x = k.add(OpKind::Add, p + "res1", {x, h});
    h = k.add(OpKind::LayerNorm, p + "ln2", {x});
    h = k.column(p + "mlp.up", h, 4 * dt);
    h = k.add(OpKind::GELU, p + "mlp.gelu", {h});
    h = k.row(p + "mlp.down", h);
    h = k.add(OpKind::Dropout, p + "mlp.drop", {h});
    x = k.add(OpKind::Add, p + "res2", {x, h});
  }
  if (r.last_stage) {
    const int h = k.add(OpKind::LayerNorm, "lnf", {x});
    k.add(OpKind::SoftmaxCELoss, "loss", {k.column("head", h, dt)});
  } else {
    k.send(x);
  }
}

}  // namespace

Model rank_model(const StackShape& g, const RankSlice& r) {
  const int64_t t = r.tp;
  const bool gpt = g.family == StackShape::Family::Gpt;
  if (gpt) need_divides(g, t, g.heads, "head count");
  else need_divides(g, t, g.hidden, "width");
  if (r.sp) need_divides(g, t, g.seq, "sequence length");
  if (r.blocks < 1 || r.first_block < 0 || r.first_block + r.blocks > g.layers)
    throw InputError("--parallel: blocks [" + std::to_string(r.first_block) + ", " + std::to_string(r.first_block + r.blocks) +
                     ") are not within the " + std::to_string(g.layers) + " of '" + g.spec + "'");
  const int64_t s_local = r.sp ? g.seq / t : g.seq;  // the sequence a LayerNorm, dropout or residual holds
  Model m;
  m.name = rank_name(g, r);
  RankBuilder k{.m = m,
                .r = r,
                .dtype = g.dtype,
                .lead = gpt ? std::vector<int64_t>{g.batch, g.seq} : std::vector<int64_t>{g.seq * g.batch},
                .lead_local = gpt ? std::vector<int64_t>{g.batch, s_local} : std::vector<int64_t>{s_local * g.batch},
                .width = g.hidden};
  if (gpt) build_gpt(k, g, r);
  else build_transformer(k, g, r);
  m.finalize();
  return m;
}

}  // namespace remat
