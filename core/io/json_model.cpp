#include "core/io/json_model.h"

#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/base/errors.h"
#include "core/io/atomic_file.h"
#include "core/io/model_source.h"
#include "core/kernels/pointwise_fns.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

using nlohmann::json;

constexpr int kFormatVersion = 1;
constexpr int64_t kMaxDim = int64_t{1} << 40;

// Every error names the JSON pointer of the offending value.
[[noreturn]] void fail(const std::string& origin, const std::string& pointer, const std::string& what) {
  throw InputError(origin + ": " + (pointer.empty() ? "/" : pointer) + ": " + what);
}

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

std::string kind_list() {
  std::string s;
  for (int k = 0; k <= static_cast<int>(kLastOpKind); ++k)
    s += (k ? ", " : "") + std::string(kind_name(static_cast<OpKind>(k)));
  return s;
}

// The attribute fields and the kinds that take them (op_rules.cpp reads them).
struct AttrField {
  std::string_view key;
  std::initializer_list<OpKind> kinds;
};
using K = OpKind;
const AttrField kAttrFields[] = {
    {"channels", {K::Conv, K::ConvTranspose}},
    {"vocab", {K::Embedding}},
    {"kernel", {K::Conv, K::MaxPool, K::AvgPool, K::ConvTranspose}},
    {"stride", {K::Conv, K::MaxPool, K::AvgPool, K::ConvTranspose}},
    {"pads", {K::Conv, K::MaxPool, K::AvgPool, K::ConvTranspose, K::Pad}},
    {"dilation", {K::Conv, K::MaxPool, K::ConvTranspose}},
    {"groups", {K::Conv, K::ConvTranspose, K::GroupNorm}},
    {"output_padding", {K::ConvTranspose}},
    {"mode", {K::Upsample, K::Pad}},
    {"align_corners", {K::Upsample}},
    {"ceil_mode", {K::MaxPool, K::AvgPool}},
    {"count_include_pad", {K::AvgPool}},
    {"output_size", {K::AvgPool}},
    {"bias", {K::Conv, K::Linear, K::ConvTranspose}},
    {"axis", {K::Softmax, K::Concat, K::Slice, K::TopK, K::Gather, K::Cumsum}},
    {"k", {K::TopK}},
    {"perm", {K::Transpose}},
    {"start", {K::Slice}},
    {"end", {K::Slice}},
    {"step", {K::Slice}},
    {"const_shape", {K::MulConst, K::DivConst, K::AddConst, K::MaskedFill, K::Pointwise, K::Concat, K::Attention}},
    {"values", {K::MulConst, K::DivConst, K::AddConst, K::MaskedFill, K::Pointwise, K::Concat, K::Attention}},
    {"fill", {K::MaskedFill, K::Pad}},
    {"learned", {K::AddConst, K::Pointwise, K::Concat}},
    {"fn", {K::Pointwise, K::Reduce}},
    {"const_at", {K::Pointwise, K::Concat}},
    {"scalar", {K::Pointwise}},
    {"alpha", {K::Pointwise}},
    {"beta", {K::Pointwise}},
    {"axes", {K::Reduce}},
    {"keepdim", {K::Reduce}},
    {"copy", {K::Reshape}},
    {"causal", {K::Attention}},
    {"scale", {K::Attention}},
    {"eps", {K::LayerNorm, K::BatchNorm, K::GroupNorm}},
    {"affine", {K::LayerNorm, K::BatchNorm, K::GroupNorm}},
    {"label_smoothing", {K::SoftmaxCELoss}},
};

}  // namespace

std::vector<std::string_view> attribute_keys() {
  std::vector<std::string_view> keys;
  for (const auto& f : kAttrFields) keys.push_back(f.key);
  return keys;
}

namespace {

bool takes(OpKind kind, std::string_view key) {
  for (const auto& f : kAttrFields)
    if (f.key == key) return std::find(f.kinds.begin(), f.kinds.end(), kind) != f.kinds.end();
  return false;
}

std::string takers(std::string_view key) {
  if (std::none_of(std::begin(kAttrFields), std::end(kAttrFields), [&](const AttrField& f) { return f.key == key; }))
    return {};
  std::string s;
  for (const auto& f : kAttrFields) {
    if (f.key != key) continue;
    for (OpKind k : f.kinds) s += (s.empty() ? "" : ", ") + std::string(kind_name(k));
  }
  return s;
}

struct Reader {
  const std::string& origin;

  int64_t integer(const json& v, const std::string& at, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(origin, at, "expected an integer, got " + type_of(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(origin, at, "value " + std::to_string(v.get<uint64_t>()) + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      fail(origin, at, "value " + std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    return x;
  }
  double number(const json& v, const std::string& at, double lo, double hi) const {
    if (!v.is_number()) fail(origin, at, "expected a number, got " + type_of(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
      fail(origin, at, "value " + v.dump() + " is out of range [" + json(lo).dump() + ", " + json(hi).dump() + "]");
    return x;
  }
  // A number, or "inf" / "-inf" (JSON has no infinities; a mask fills with -inf).
  float extended_number(const json& v, const std::string& at) const {
    if (v.is_string() && (v.get<std::string>() == "-inf" || v.get<std::string>() == "inf"))
      return v.get<std::string>() == "inf" ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    if (!v.is_number()) fail(origin, at, "expected a number, \"inf\" or \"-inf\", got " + type_of(v));
    return static_cast<float>(number(v, at, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max()));
  }
  // A constant's values: a number (a scalar), an array of numbers (row-major
  // over `shape`, flat or nested as written) or "causal" (a causal mask over
  // the last two dimensions of `shape`).
  ConstValues constant(const json& v, const std::string& at, const std::vector<int64_t>& shape) const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    if (v.is_string()) {
      if (v.get<std::string>() != "causal") fail(origin, at, "expected numbers or \"causal\", got \"" + v.get<std::string>() + "\"");
      if (shape.size() < 2 || shape[shape.size() - 2] != shape.back() || n != shape.back() * shape.back())
        fail(origin, at, "a causal mask needs a const_shape of (…, T, T) with leading 1s");
      return causal_mask_values(shape.back());
    }
    auto out = std::make_shared<std::vector<float>>();
    if (v.is_number()) {
      out->push_back(static_cast<float>(number(v, at, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max())));
    } else {
      const auto& a = array(v, at);
      out->reserve(a.size());
      // An additive mask holds -inf (a causal one added to the scores).
      for (std::size_t i = 0; i < a.size(); ++i) out->push_back(extended_number(a[i], at + "/" + std::to_string(i)));
    }
    if (static_cast<int64_t>(out->size()) != n)
      fail(origin, at, std::to_string(out->size()) + " values for a constant of shape " + shape_string(shape) + " (" +
                           std::to_string(n) + " expected)");
    return ConstValues{std::move(out)};
  }
  bool boolean(const json& v, const std::string& at) const {
    if (!v.is_boolean()) fail(origin, at, "expected a boolean, got " + type_of(v));
    return v.get<bool>();
  }
  std::vector<int64_t> ints(const json& v, const std::string& at, int64_t lo, int64_t hi) const {
    const auto& a = array(v, at);
    if (a.size() > 2 * kMaxRank) fail(origin, at, "more than " + std::to_string(2 * kMaxRank) + " entries");
    std::vector<int64_t> out;
    for (std::size_t i = 0; i < a.size(); ++i) out.push_back(integer(a[i], at + "/" + std::to_string(i), lo, hi));
    return out;
  }
  const std::string& string(const json& v, const std::string& at) const {
    if (!v.is_string()) fail(origin, at, "expected a string, got " + type_of(v));
    return v.get_ref<const std::string&>();
  }
  const json::array_t& array(const json& v, const std::string& at) const {
    if (!v.is_array()) fail(origin, at, "expected an array, got " + type_of(v));
    return v.get_ref<const json::array_t&>();
  }
  // Ids of earlier ops, for "inputs" and "saved" (saved may also name the op itself).
  std::vector<int> ids(const json& v, const std::string& at, int self, int count, bool allow_self) const {
    const auto& a = array(v, at);
    if (a.size() > kMaxOpInputs) fail(origin, at, "more than " + std::to_string(kMaxOpInputs) + " entries");
    std::vector<int> out;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string ai = at + "/" + std::to_string(i);
      const int64_t id = integer(a[i], ai, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      if (id < 0 || id >= count)
        fail(origin, ai, "op " + std::to_string(id) + " does not exist (the model has ops 0.." + std::to_string(count - 1) + ")");
      if (id > self || (id == self && !allow_self))
        fail(origin, ai, "op " + std::to_string(id) + " is not an earlier op (ops must be listed in topological order: a forward reference or a cycle)");
      out.push_back(static_cast<int>(id));
    }
    return out;
  }
};

bool known(std::string_view key, std::initializer_list<std::string_view> keys) {
  for (auto k : keys) {
    if (k == key) return true;
  }
  return false;
}

// A Pointwise function or a reduction, by name.
uint8_t family_fn(const Reader& r, OpKind kind, const std::string& name, const std::string& at) {
  std::string all;
  if (kind == OpKind::Pointwise) {
    for (int f = 0; f < pw::kFnCount; ++f) {
      if (name == pw::kFns[f].name) return static_cast<uint8_t>(f);
      all += (f ? ", " : "") + std::string(pw::kFns[f].name);
    }
  } else {
    for (uint8_t f = 0; f < 3; ++f) {
      if (name == pw::kReduceNames[f]) return f;
      all += (f ? ", " : "") + std::string(pw::kReduceNames[f]);
    }
  }
  fail(r.origin, at, "unknown function '" + name + "' (expected one of " + all + ")");
}

void read_attrs(const Reader& r, const json& j, const std::string& at, Op& op) {
  constexpr int64_t kBig = int64_t{1} << 40;
  for (const auto& [key, v] : j.items()) {
    if (takers(key).empty()) continue;  // not an attribute
    const std::string here = at + "/" + key;
    if (!takes(op.kind, key) && key == "learned")  // the *Const kinds' answer first: a learned product is the family's
      fail(r.origin, here, "only AddConst, Concat ops take 'learned' (and Pointwise ops: a learned product or quotient is a Pointwise mul or div)");
    if (!takes(op.kind, key)) fail(r.origin, here, "only " + takers(key) + " ops take '" + key + "'");
    OpAttrs& a = op.attrs.edit();
    if (key == "channels") a.channels = r.integer(v, here, 1, kBig);
    else if (key == "vocab") a.vocab = r.integer(v, here, 1, kBig);
    else if (key == "k") a.k = r.integer(v, here, 1, kBig);
    else if (key == "kernel") a.kernel = r.ints(v, here, 1, kBig);
    else if (key == "stride") a.stride = r.ints(v, here, 1, kBig);
    else if (key == "pads") a.pads = r.ints(v, here, op.kind == K::Pad ? -kBig : 0, kBig);  // a Pad's negative ones crop
    else if (key == "dilation") a.dilation = r.ints(v, here, 1, kBig);
    else if (key == "groups") a.groups = r.integer(v, here, 1, kBig);
    else if (key == "ceil_mode") a.ceil_mode = r.boolean(v, here);
    else if (key == "count_include_pad") a.count_include_pad = r.boolean(v, here);
    else if (key == "output_size") a.output_size = r.ints(v, here, 1, kBig);
    else if (key == "bias") a.bias = r.boolean(v, here);
    else if (key == "axis") a.axis = r.integer(v, here, -static_cast<int64_t>(kMaxRank), kMaxRank - 1);
    else if (key == "perm") a.perm = r.ints(v, here, 0, kMaxRank - 1);
    else if (key == "start") a.start = r.integer(v, here, -kBig, kBig);
    else if (key == "end") a.end = r.integer(v, here, -kBig, kBig);
    else if (key == "step") a.step = r.integer(v, here, 1, kBig);
    else if (key == "const_shape") a.const_shape = r.ints(v, here, 1, kBig);
    else if (key == "learned") a.learned = r.boolean(v, here);
    else if (key == "const_at") a.const_at = r.integer(v, here, 0, 256);
    else if (key == "copy") a.copy = r.boolean(v, here);
    else if (key == "causal") a.causal = r.boolean(v, here);
    else if (key == "scale") a.scale = static_cast<float>(r.number(v, here, 1e-30, 1e30));  // positive: 0 means "default"
    else if (key == "output_padding") a.output_padding = r.ints(v, here, 0, kBig);
    else if (key == "align_corners") a.align_corners = r.boolean(v, here);
    else if (key == "mode" && op.kind == K::Pad) {
      const std::string& m = r.string(v, here);
      static constexpr std::string_view kModes[] = {"constant", "reflect", "replicate", "circular"};
      const auto* found = std::find(std::begin(kModes), std::end(kModes), m);
      if (found == std::end(kModes))
        fail(r.origin, here, "unknown mode '" + m + "' (expected constant, reflect, replicate or circular)");
      a.pad_mode = static_cast<uint8_t>(found - std::begin(kModes));
    } else if (key == "mode") {
      const std::string& m = r.string(v, here);
      if (m != "nearest" && m != "bilinear") fail(r.origin, here, "unknown mode '" + m + "' (expected nearest or bilinear)");
      a.bilinear = m == "bilinear";
    } else if (key == "eps") a.eps = r.number(v, here, 1e-30, 1);  // positive: 0 means "default"
    else if (key == "fill") (op.kind == K::Pad ? a.scalar : a.fill) = r.extended_number(v, here);  // a Pad's fill value
    else if (key == "affine") a.affine = r.boolean(v, here);
    else if (key == "label_smoothing") a.label_smoothing = r.number(v, here, 0, 1);  // PyTorch's range
    else if (key == "fn") a.fn = family_fn(r, op.kind, r.string(v, here), here);
    else if (key == "const_at") a.const_at = r.integer(v, here, 0, 2);
    else if (key == "scalar") a.scalar = r.extended_number(v, here);
    else if (key == "axes") a.axes = r.ints(v, here, -static_cast<int64_t>(kMaxRank), kMaxRank - 1);
    else if (key == "keepdim") a.keepdim = r.boolean(v, here);
  }
  if (op.kind == OpKind::Pointwise) {
    if (!j.contains("fn")) fail(r.origin, at, "a Pointwise op needs its function (fn)");
    // PyTorch's defaults for the attributes the file leaves out.
    OpAttrs& a = op.attrs.edit();
    pw::attr_defaults(static_cast<pw::Fn>(a.fn), a.alpha, a.beta);
    if (j.contains("alpha")) a.alpha = r.extended_number(j["alpha"], at + "/alpha");
    if (j.contains("beta")) a.beta = r.extended_number(j["beta"], at + "/beta");
  }
  if (op.kind == OpKind::Reduce && !j.contains("fn")) fail(r.origin, at, "a Reduce op needs its function (fn: sum, mean or amax)");
  // After const_shape, which "causal" needs.
  if (j.contains("values")) op.attrs.edit().values = r.constant(j["values"], at + "/values", op.attrs->const_shape);
}

nlohmann::ordered_json float_json(float f);
// A float that may be infinite: "inf" / "-inf" (JSON has no infinities).
nlohmann::ordered_json extended_json(float f) {
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  return float_json(f);
}

// The attributes of `op`'s kind, as derived (defaults filled in), so a file
// reads back into the same op.
void write_attrs(const Op& op, nlohmann::ordered_json& j) {
  const OpAttrs& a = *op.attrs;
  switch (op.kind) {
    case OpKind::Conv:
    case OpKind::ConvTranspose:
      j["channels"] = a.channels;
      j["groups"] = a.groups;
      j["bias"] = a.bias;
      if (op.kind == OpKind::ConvTranspose) j["output_padding"] = a.output_padding;
      [[fallthrough]];
    case OpKind::MaxPool:
    case OpKind::AvgPool:
      if (!a.output_size.empty()) {  // adaptive: no window attributes
        j["output_size"] = a.output_size;
        break;
      }
      if (!a.count_include_pad) j["count_include_pad"] = false;
      j["kernel"] = a.kernel;
      j["stride"] = a.stride;
      j["pads"] = a.pads;
      if (op.kind != OpKind::AvgPool) j["dilation"] = a.dilation;
      if (op.kind == OpKind::MaxPool || op.kind == OpKind::AvgPool) j["ceil_mode"] = a.ceil_mode;
      break;
    case OpKind::Linear:
      if (!a.bias) j["bias"] = false;
      break;
    case OpKind::Softmax:
    case OpKind::Concat:
      j["axis"] = a.axis;
      if (a.const_at < 0) break;
      j["const_at"] = a.const_at;
      j["const_shape"] = a.const_shape;
      if (a.learned) j["learned"] = true;
      if (!a.values.empty()) {
        auto& vals = j["values"] = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < a.values.size(); ++i) vals.push_back(float_json(a.values.data()[i]));
      }
      break;
    case OpKind::Slice:
      j["axis"] = a.axis;
      j["start"] = a.start;
      j["end"] = a.end;
      j["step"] = a.step;
      break;
    case OpKind::Transpose: j["perm"] = a.perm; break;
    case OpKind::Reshape:
      if (a.copy) j["copy"] = true;
      break;
    case OpKind::Attention:
      j["causal"] = a.causal;
      if (a.scale != 0) j["scale"] = float_json(a.scale);
      if (!a.const_shape.empty() || !a.values.empty()) {  // an additive mask
        j["const_shape"] = a.const_shape;
        auto& vals = j["values"] = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < a.values.size(); ++i) vals.push_back(extended_json(a.values.data()[i]));
      }
      break;
    case OpKind::LayerNorm:
    case OpKind::BatchNorm:
      if (a.eps != 0) j["eps"] = a.eps;
      if (!a.affine) j["affine"] = false;
      break;
    case OpKind::GroupNorm:
      j["groups"] = a.groups;
      if (a.eps != 0) j["eps"] = a.eps;
      if (!a.affine) j["affine"] = false;
      break;
    case OpKind::SoftmaxCELoss:
      if (a.label_smoothing != 0) j["label_smoothing"] = a.label_smoothing;
      break;
    case OpKind::Upsample:
      j["mode"] = a.bilinear ? "bilinear" : "nearest";
      if (a.align_corners) j["align_corners"] = true;
      break;
    case OpKind::MulConst:
    case OpKind::DivConst:
    case OpKind::AddConst:
    case OpKind::MaskedFill:
      if (!a.const_shape.empty()) j["const_shape"] = a.const_shape;
      if (a.learned) j["learned"] = true;
      if (op.kind == OpKind::MaskedFill && is_causal_mask(a.const_shape, a.values)) {
        j["values"] = "causal";
      } else if (a.values.size() == 1 && a.const_shape.empty()) {
        j["values"] = float_json(a.values.data()[0]);  // a scalar
      } else if (!a.values.empty()) {
        auto& vals = j["values"] = nlohmann::ordered_json::array();
        for (std::size_t i = 0; i < a.values.size(); ++i) vals.push_back(extended_json(a.values.data()[i]));
      }
      if (op.kind == OpKind::MaskedFill) {
        if (std::isinf(a.fill)) j["fill"] = a.fill < 0 ? "-inf" : "inf";
        else j["fill"] = float_json(a.fill);
      }
      break;
    case OpKind::Pad: {
      static constexpr const char* kModes[] = {"constant", "reflect", "replicate", "circular"};
      j["mode"] = kModes[a.pad_mode & 3];
      j["pads"] = a.pads;
      if (a.pad_mode == 0) j["fill"] = extended_json(a.scalar);
      break;
    }
    case OpKind::Embedding: j["vocab"] = a.vocab; break;
    case OpKind::TopK:
      j["k"] = a.k;
      j["axis"] = a.axis;
      break;
    case OpKind::Gather:
    case OpKind::Cumsum: j["axis"] = a.axis; break;
    case OpKind::Pointwise: {
      j["fn"] = pw::kFns[a.fn].name;
      if (a.const_at >= 0) {
        j["const_at"] = a.const_at;
        if (!a.const_shape.empty()) j["const_shape"] = a.const_shape;
        if (a.learned) j["learned"] = true;
        if (a.values.size() == 1 && a.const_shape.empty()) {
          j["values"] = float_json(a.values.data()[0]);
        } else if (!a.values.empty()) {
          auto& vals = j["values"] = nlohmann::ordered_json::array();
          for (std::size_t i = 0; i < a.values.size(); ++i) vals.push_back(extended_json(a.values.data()[i]));
        }
      }
      const PwOperands ops = pointwise_operands(op);
      if (ops.problem.empty() && ops.at[ops.arity - 1].src == PwOperand::Scalar) j["scalar"] = extended_json(a.scalar);
      float p = 0, q = 0;
      const int takes = pw::attr_defaults(static_cast<pw::Fn>(a.fn), p, q);
      if (takes >= 1) j["alpha"] = extended_json(a.alpha);
      if (takes >= 2) j["beta"] = extended_json(a.beta);
      break;
    }
    case OpKind::Reduce:
      j["fn"] = pw::kReduceNames[a.fn];
      j["axes"] = a.axes;
      if (a.keepdim) j["keepdim"] = true;
      break;
    default: break;
  }
}

Op read_op(const Reader& r, const json& j, int id, int count, bool& explicit_saved) {
  const std::string at = "/ops/" + std::to_string(id);
  if (!j.is_object()) fail(r.origin, at, "expected an object, got " + type_of(j));
  for (const auto& [key, value] : j.items()) {
    if (!known(key, {"id", "name", "kind", "inputs", "shape", "dtype", "activation", "p", "bytes", "fwd_flops",
                     "bwd_flops", "saved", "param_bytes", "aux_bytes", "simulate_only", "comment", "torch"}) &&
        takers(key).empty())
      fail(r.origin, at + "/" + key, "unknown field '" + key + "'");
  }
  if (!j.contains("id")) fail(r.origin, at, "missing field 'id'");
  const int64_t given = r.integer(j["id"], at + "/id", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (given != id)
    fail(r.origin, at + "/id", "id " + std::to_string(given) + " must equal the op's position " + std::to_string(id) +
                                   " (ops are listed in topological order)");
  if (!j.contains("kind")) fail(r.origin, at, "missing field 'kind'");
  Op op;
  const std::string& kind = r.string(j["kind"], at + "/kind");
  if (!parse_kind(kind, op.kind)) fail(r.origin, at + "/kind", "unknown kind '" + kind + "' (expected one of " + kind_list() + ")");
  op.name = j.contains("name") ? r.string(j["name"], at + "/name") : std::string(kind_name(op.kind)) + std::to_string(id);
  if (j.contains("inputs")) op.inputs = r.ids(j["inputs"], at + "/inputs", id, count, false);
  if (j.contains("shape")) {
    const auto& s = r.array(j["shape"], at + "/shape");
    if (s.size() > kMaxRank) fail(r.origin, at + "/shape", "rank " + std::to_string(s.size()) + " is over the limit of " + std::to_string(kMaxRank));
    for (std::size_t i = 0; i < s.size(); ++i) op.shape.push_back(r.integer(s[i], at + "/shape/" + std::to_string(i), 1, kMaxDim));
  }
  if (j.contains("dtype")) {
    const std::string& d = r.string(j["dtype"], at + "/dtype");
    if (!parse_dtype(d, op.dtype)) fail(r.origin, at + "/dtype", "unknown dtype '" + d + "' (expected f32, f16, bf16, i32 or i64)");
  }
  try {
    (void)tensor_bytes(op.shape, op.dtype);  // before any rule multiplies the dimensions
  } catch (const InputError& e) {
    fail(r.origin, at + "/shape", e.what());
  }
  if (j.contains("activation")) {
    if (op.kind != OpKind::Dense) fail(r.origin, at + "/activation", "only Dense ops take an activation");
    const std::string& a = r.string(j["activation"], at + "/activation");
    if (!parse_activation(a, op.act)) fail(r.origin, at + "/activation", "unknown activation '" + a + "' (expected none, relu or tanh)");
  }
  if (j.contains("p")) {
    if (op.kind != OpKind::Dropout) fail(r.origin, at + "/p", "only Dropout ops take a probability p");
    const double p = r.number(j["p"], at + "/p", 0.0, 1.0);
    if (p >= 1.0) fail(r.origin, at + "/p", "dropout p must be below 1");
    op.dropout_p = static_cast<float>(p);
  }
  read_attrs(r, j, at, op);
  if (j.contains("bytes")) op.bytes = static_cast<uint64_t>(r.integer(j["bytes"], at + "/bytes", 1, int64_t{1} << 48));
  if (j.contains("aux_bytes")) op.aux_bytes = static_cast<uint64_t>(r.integer(j["aux_bytes"], at + "/aux_bytes", 0, int64_t{1} << 48));
  if (j.contains("fwd_flops")) op.fwd_flops = r.number(j["fwd_flops"], at + "/fwd_flops", 0, 1e30);
  if (j.contains("bwd_flops")) op.bwd_flops = r.number(j["bwd_flops"], at + "/bwd_flops", 0, 1e30);
  if (j.contains("param_bytes")) op.param_bytes = static_cast<uint64_t>(r.integer(j["param_bytes"], at + "/param_bytes", 0, int64_t{1} << 48));
  if (j.contains("simulate_only")) {
    if (!j["simulate_only"].is_boolean()) fail(r.origin, at + "/simulate_only", "expected a boolean, got " + type_of(j["simulate_only"]));
    op.simulate_only = j["simulate_only"].get<bool>();
  }
  explicit_saved = j.contains("saved");
  if (explicit_saved) {
    op.saved = r.ids(j["saved"], at + "/saved", id, count, true);
    for (std::size_t i = 0; i < op.saved.size(); ++i) {
      const int s = op.saved[i];
      if (s != id && std::find(op.inputs.begin(), op.inputs.end(), s) == op.inputs.end())
        fail(r.origin, at + "/saved/" + std::to_string(i), "op " + std::to_string(s) + " is neither an input of this op nor the op itself");
    }
  }
  // Checked here so that the error names the field (finalize would name the op).
  if (id == 0 && op.kind != OpKind::Input) fail(r.origin, at + "/kind", "the first op must be the Input, not " + kind);
  if (id > 0 && op.kind == OpKind::Input) fail(r.origin, at + "/kind", "only op 0 may be an Input");
  if (id == count - 1 && !is_loss(op.kind) && op.kind != OpKind::Generic)
    fail(r.origin, at + "/kind", "the last op must be a loss (MSELoss, SoftmaxCELoss or BCEWithLogitsLoss), not " + kind);
  if (is_loss(op.kind) && id != count - 1) fail(r.origin, at + "/kind", "a loss must be the last op");
  return op;
}

// "torch": {"module": "layer1.0", "aten": "aten.addmm.default", "call": 3,
// "place": 1}, written by remat_capture (docs/model-format.md).
TorchOrigin read_torch_origin(const Reader& r, const json& j, const std::string& at) {
  if (!j.is_object()) fail(r.origin, at, "expected an object {\"module\", \"aten\", \"call\", \"place\"}, got " + type_of(j));
  for (const auto& [key, value] : j.items()) {
    if (!known(key, {"module", "aten", "call", "place"})) fail(r.origin, at + "/" + key, "unknown field '" + key + "'");
  }
  TorchOrigin o;
  o.outside = !j.contains("module");  // the loss function's ops ran outside every module
  if (j.contains("module")) o.module = r.string(j["module"], at + "/module");
  if (j.contains("aten")) o.aten = r.string(j["aten"], at + "/aten");
  if (j.contains("call")) o.call = static_cast<int>(r.integer(j["call"], at + "/call", 0, std::numeric_limits<int32_t>::max()));
  if (j.contains("place")) o.place = static_cast<int>(r.integer(j["place"], at + "/place", 0, std::numeric_limits<int32_t>::max()));
  if (!o.aten.empty() && (o.call < 0 || o.place < 0)) fail(r.origin, at, "an op with 'aten' needs 'call' and 'place'");
  return o;
}

// Nesting is bounded before parsing, in one pass, so that a file of nested
// brackets costs nothing. (nlohmann's parse callback could do it, but its
// callback parser is quadratic in the size of an object's parent array.)
void check_depth(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) throw InputError("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// Compact decimal that reads back as the same float (0.1f -> 0.1).
nlohmann::ordered_json float_json(float f) {
  std::array<char, 32> buf{};
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), f);
  return nlohmann::ordered_json::parse(std::string(buf.data(), res.ptr));
}

}  // namespace

Model model_from_json(const json& doc, const std::string& origin, const std::string& default_name) {
  const Reader r{origin};
  if (!doc.is_object()) fail(origin, "", "expected a JSON object {\"format\":\"remat-model\",...}, got " + type_of(doc));
  for (const auto& [key, value] : doc.items()) {
    if (!known(key, {"format", "version", "name", "ops", "description"})) fail(origin, "/" + key, "unknown field '" + key + "'");
  }
  if (!doc.contains("format")) fail(origin, "", "missing field 'format' (\"remat-model\")");
  if (r.string(doc["format"], "/format") != "remat-model")
    fail(origin, "/format", "expected \"remat-model\", got \"" + doc["format"].get<std::string>() + "\"");
  if (!doc.contains("version")) fail(origin, "", "missing field 'version'");
  const int64_t version = r.integer(doc["version"], "/version", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (version != kFormatVersion)
    fail(origin, "/version", "version " + std::to_string(version) + " is not supported (this build reads version " +
                                 std::to_string(kFormatVersion) + ")");
  Model m;
  m.name = doc.contains("name") ? r.string(doc["name"], "/name") : default_name;
  if (doc.contains("description")) r.string(doc["description"], "/description");
  if (!doc.contains("ops")) fail(origin, "", "missing field 'ops'");
  const auto& ops = r.array(doc["ops"], "/ops");
  if (ops.size() < 2) fail(origin, "/ops", "a model needs at least an Input and a loss (got " + std::to_string(ops.size()) + " ops)");
  if (ops.size() > kMaxModelOps) fail(origin, "/ops", std::to_string(ops.size()) + " ops are over the limit of " + std::to_string(kMaxModelOps));
  const int count = static_cast<int>(ops.size());
  for (int id = 0; id < count; ++id) {
    bool explicit_saved = false;
    const json& oj = ops[static_cast<std::size_t>(id)];
    Op op = read_op(r, oj, id, count, explicit_saved);
    if (oj.contains("torch")) {
      if (m.torch_origin.empty()) m.torch_origin.resize(static_cast<std::size_t>(count));
      m.torch_origin[static_cast<std::size_t>(id)] = read_torch_origin(r, oj["torch"], "/ops/" + std::to_string(id) + "/torch");
    }
    const std::string where = origin + ": /ops/" + std::to_string(id) + " ('" + op.name + "')";
    try {
      m.add(std::move(op), where, explicit_saved);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      if (msg.rfind(where, 0) == 0) throw;
      throw InputError(where + ": " + msg);  // tensor_bytes overflow carries no location
    }
  }
  try {
    m.finalize();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    // "op 3 ('x') is never used..." -> point at the op.
    if (msg.rfind("op ", 0) == 0) {
      const auto space = msg.find(' ', 3);
      throw InputError(origin + ": /ops/" + msg.substr(3, space - 3) + ": " + msg);
    }
    throw InputError(origin + ": " + msg);
  }
  return m;
}

Model parse_json_model(std::string_view text, const std::string& origin, const std::string& default_name) {
  json doc;
  try {
    check_depth(text);
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const auto colon = what.find("parse error");
    throw InputError(origin + ": not valid JSON (byte " + std::to_string(e.byte) + "): " +
                     (colon == std::string::npos ? what : what.substr(colon)));
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond double (found by fuzzing)
    std::string what = e.what();
    const auto close = what.find("] ");
    throw InputError(origin + ": not valid JSON: " + (close == std::string::npos ? what : what.substr(close + 2)));
  } catch (const InputError& e) {
    throw InputError(origin + ": not a model file: " + e.what());
  }
  return model_from_json(doc, origin, default_name);
}

nlohmann::ordered_json model_to_json(const Model& model) {
  using ojson = nlohmann::ordered_json;
  ojson ops = ojson::array();
  Model rebuilt;  // the ops before v, so derive_op sees the same inputs and id
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    const Op probe = derived_by_rules(op, rebuilt.ops(), "op " + std::to_string(v));

    ojson j;
    j["id"] = v;
    j["name"] = op.name;
    j["kind"] = std::string(kind_name(op.kind));
    if (!op.inputs.empty()) j["inputs"] = op.inputs;
    if (!op.shape.empty()) j["shape"] = op.shape;
    if (op.dtype != DType::F32) j["dtype"] = std::string(dtype_name(op.dtype));
    if (op.kind == OpKind::Dense) j["activation"] = std::string(activation_name(op.act));
    if (op.kind == OpKind::Dropout) j["p"] = float_json(op.dropout_p);
    write_attrs(op, j);
    if (op.bytes != probe.bytes) j["bytes"] = op.bytes;
    // A zero cost cannot be written explicitly (0 means "derive"); only custom
    // ops carry costs, and theirs are positive.
    if (op.fwd_flops != probe.fwd_flops && op.fwd_flops > 0) j["fwd_flops"] = op.fwd_flops;
    if (op.bwd_flops != probe.bwd_flops && op.bwd_flops > 0) j["bwd_flops"] = op.bwd_flops;
    if (op.saved != probe.saved) j["saved"] = op.saved;
    if (op.param_bytes != probe.param_bytes && op.param_bytes > 0) j["param_bytes"] = op.param_bytes;
    if (op.aux_bytes != probe.aux_bytes && op.aux_bytes > 0) j["aux_bytes"] = op.aux_bytes;
    if (op.simulate_only && !probe.simulate_only) j["simulate_only"] = true;
    if (static_cast<std::size_t>(v) < model.torch_origin.size()) {
      const TorchOrigin& t = model.torch_origin[static_cast<std::size_t>(v)];
      if (!t.aten.empty() || !t.outside) {
        ojson tj;
        if (!t.outside) tj["module"] = t.module;
        if (!t.aten.empty()) {
          tj["aten"] = t.aten;
          tj["call"] = t.call;
          tj["place"] = t.place;
        }
        j["torch"] = std::move(tj);
      }
    }
    ops.push_back(std::move(j));

    Op copy = op;
    rebuilt.add(std::move(copy), "op " + std::to_string(v), true);
  }
  return ojson{{"format", "remat-model"}, {"version", kFormatVersion}, {"name", model.name}, {"ops", std::move(ops)}};
}

Model load_json_model(const std::string& path) {
  const std::string origin = "model file '" + path + "'";
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(origin + ": cannot read it (" + ec.message() + ")");
  if (size > kMaxJsonModelFileBytes)
    throw InputError(origin + ": " + std::to_string(size) + " bytes is over the limit of " +
                     std::to_string(kMaxJsonModelFileBytes >> 20) + " MiB for JSON models");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(origin + ": cannot open it");
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) throw InputError(origin + ": read failed");
  return parse_json_model(text, origin, std::filesystem::path(path).stem().string());
}

void save_json_model(const Model& model, const std::string& path) {
  const auto doc = model_to_json(model);
  // One op per line: diffable and still readable for thousands of ops.
  write_file_atomically(path, [&](std::ostream& out) {
    out << "{\"format\": \"remat-model\", \"version\": " << doc["version"].dump() << ", \"name\": " << doc["name"].dump()
        << ",\n \"ops\": [\n";
    const auto& ops = doc["ops"];
    for (std::size_t i = 0; i < ops.size(); ++i) out << "  " << ops[i].dump() << (i + 1 < ops.size() ? ",\n" : "\n");
    out << "]}\n";
  });
}

}  // namespace remat
