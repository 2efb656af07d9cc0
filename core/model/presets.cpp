#include "core/model/presets.h"

#include <charconv>

#include "core/base/errors.h"
#include "core/model/preset_models.h"
#include "core/base/spec_parse.h"

namespace remat {
namespace {

Op make(OpKind kind, std::string name, OpIds inputs, Shape shape = {}) {
  Op op;
  op.kind = kind;
  op.name = std::move(name);
  op.inputs = inputs;
  op.shape = shape;
  return op;
}

// `prefix` followed by `i` ("a12"): short names stay in std::string's inline
// buffer, so naming a million ops allocates nothing.
std::string numbered(std::string_view prefix, int i) {
  char buf[32];
  const std::size_t p = prefix.copy(buf, 16);
  const auto end = std::to_chars(buf + p, buf + sizeof buf, i).ptr;
  return std::string(buf, end);
}

// Optional positional field `i` of a spec, or `fallback`.
int64_t field(const std::vector<std::string>& f, std::size_t i, int64_t fallback, const std::string& what,
              int64_t hi) {
  return i < f.size() ? parse_int(f[i], what, 1, hi) : fallback;
}

Model chain(const std::vector<std::string>& f, const std::string& spec) {
  if (f.size() < 2 || f.size() > 3) throw InputError("model spec '" + spec + "': expected chain:N[:BYTES]");
  const int n = static_cast<int>(field(f, 1, 0, "chain length N in '" + spec + "'", 10'000'000));
  const int64_t bytes = field(f, 2, 1, "activation bytes in '" + spec + "'", int64_t{1} << 40);
  // Unit sizes that are not whole floats can only be simulated.
  const bool runnable = bytes % 4 == 0;
  const int64_t width = runnable ? bytes / 4 : 1;
  Model m;
  m.name = spec;
  m.reserve(n + 1);
  auto add = [&](Op op) {
    op.bytes = static_cast<uint64_t>(bytes);
    op.simulate_only = !runnable;
    return m.add(std::move(op));
  };
  int prev = add(make(OpKind::Input, "x", {}, {1, width}));
  for (int i = 1; i < n; ++i) {
    Op d = make(OpKind::Dense, numbered("a", i), {prev}, {1, width});
    d.act = Activation::Tanh;
    prev = add(std::move(d));
  }
  add(make(OpKind::MSELoss, "loss", {prev}));
  m.finalize();
  return m;
}

Model mlp(const std::vector<std::string>& f, const std::string& spec) {
  if (f.size() < 2 || f.size() > 4) throw InputError("model spec '" + spec + "': expected mlp:N[:WIDTH[:BATCH]]");
  const int n = static_cast<int>(field(f, 1, 0, "layer count N in '" + spec + "'", 1'000'000));
  const int64_t width = field(f, 2, 256, "WIDTH in '" + spec + "'", 1 << 20);
  const int64_t batch = field(f, 3, 32, "BATCH in '" + spec + "'", 1 << 24);
  Model m;
  m.name = spec;
  m.reserve(2 * n + 2);
  int prev = m.add(make(OpKind::Input, "x", {}, {batch, width}));
  for (int i = 1; i <= n; ++i) {
    const std::string l = numbered("l", i);
    prev = m.add(make(OpKind::Linear, l + ".fc", {prev}, {batch, width}));
    prev = m.add(make(OpKind::ReLU, l + ".relu", {prev}));
  }
  m.add(make(OpKind::MSELoss, "loss", {prev}));
  m.finalize();
  return m;
}

Model transformer(const std::vector<std::string>& f, const std::string& spec) {
  if (f.size() < 2 || f.size() > 5)
    throw InputError("model spec '" + spec + "': expected transformer:L[:D[:SEQ[:BATCH]]]");
  const int layers = static_cast<int>(field(f, 1, 0, "block count L in '" + spec + "'", 100'000));
  const int64_t d = field(f, 2, 256, "width D in '" + spec + "'", 1 << 16);
  const int64_t seq = field(f, 3, 64, "SEQ in '" + spec + "'", 1 << 20);
  const int64_t batch = field(f, 4, 4, "BATCH in '" + spec + "'", 1 << 16);
  const int64_t rows = seq * batch;
  constexpr float kDropout = 0.1f;
  Model m;
  m.name = spec;
  m.reserve(12 * layers + 4);
  auto add = [&](OpKind k, const std::string& name, OpIds in, Shape shape = {}) {
    Op op = make(k, name, in, shape);
    if (k == OpKind::Dropout) op.dropout_p = kDropout;
    return m.add(std::move(op));
  };
  int x = add(OpKind::Input, "x", {}, {rows, d});
  for (int b = 0; b < layers; ++b) {
    const std::string p = numbered("b", b) + ".";
    // Token mixer stand-in (no attention op yet): LN → Linear → Tanh → Linear → Dropout.
    int h = add(OpKind::LayerNorm, p + "ln1", {x});
    h = add(OpKind::Linear, p + "mix.in", {h}, {rows, d});
    h = add(OpKind::Tanh, p + "mix.tanh", {h});
    h = add(OpKind::Linear, p + "mix.out", {h}, {rows, d});
    h = add(OpKind::Dropout, p + "mix.drop", {h});
    x = add(OpKind::Add, p + "res1", {x, h});
    h = add(OpKind::LayerNorm, p + "ln2", {x});
    h = add(OpKind::Linear, p + "mlp.up", {h}, {rows, 4 * d});
    h = add(OpKind::GELU, p + "mlp.gelu", {h});
    h = add(OpKind::Linear, p + "mlp.down", {h}, {rows, d});
    h = add(OpKind::Dropout, p + "mlp.drop", {h});
    x = add(OpKind::Add, p + "res2", {x, h});
  }
  int h = add(OpKind::LayerNorm, "lnf", {x});
  h = add(OpKind::Linear, "head", {h}, {rows, d});
  add(OpKind::SoftmaxCELoss, "loss", {h});
  m.finalize();
  return m;
}

}  // namespace

bool is_preset_spec(std::string_view spec) {
  return spec.starts_with("chain:") || spec.starts_with("mlp:") || spec.starts_with("transformer:") ||
         spec.starts_with("gpt:") || spec.starts_with("resnet:");
}

Model make_preset(std::string_view spec_view) {
  const std::string spec(spec_view);
  const auto f = split(spec, ':');
  if (f[0] == "chain") return chain(f, spec);
  if (f[0] == "mlp") return mlp(f, spec);
  if (f[0] == "transformer") return transformer(f, spec);
  if (f[0] == "gpt") return gpt_preset(f, spec);
  if (f[0] == "resnet") return resnet_preset(f, spec);
  throw InputError("unknown model spec '" + spec + "': expected " + std::string(kPresetSpecs));
}

}  // namespace remat
