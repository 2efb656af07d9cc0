// Constant folding at import: a node whose inputs are all constants (shape
// arithmetic on Shape's result, a causal mask made of ones and Trilu, a
// transposed weight) is evaluated here, so its result is a constant with
// known values, never an activation. What cannot be evaluated (an op not
// below, a result over kMaxFoldedElems) stays a constant of unknown value.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/io/onnx_importer.h"

namespace remat::onnx_import {

namespace {

// Larger results are left unknown: folding is for shapes and masks, and a
// weight is transposed once (2^26 floats: a 256 MiB table).
constexpr int64_t kMaxFoldedElems = int64_t{1} << 26;

bool is_float_type(int32_t t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (const int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxFoldedElems / d)) return -1;
    n *= d;
  }
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * dims[i];
  return st;
}

// The dims of the inputs broadcast together (numpy rules); false when they
// do not broadcast or the result is too large.
bool broadcast_dims(const std::vector<const std::vector<int64_t>*>& in, std::vector<int64_t>& out) {
  std::size_t rank = 0;
  for (const auto* d : in) rank = std::max(rank, d->size());
  out.assign(rank, 1);
  for (const auto* d : in) {
    for (std::size_t k = 0; k < d->size(); ++k) {
      const int64_t v = (*d)[k];
      int64_t& o = out[rank - d->size() + k];
      if (v == o || v == 1) continue;
      if (o != 1) return false;
      o = v;
    }
  }
  return numel_of(out) >= 0;
}

// Offsets into an input of dims `d` for each element of `out`, broadcast.
std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& d, const std::vector<int64_t>& out) {
  const std::size_t lead = out.size() - d.size();
  std::vector<int64_t> step(out.size(), 0);
  const std::vector<int64_t> st = strides_of(d);
  for (std::size_t k = 0; k < d.size(); ++k) step[lead + k] = d[k] == 1 ? 0 : st[k];
  const int64_t n = numel_of(out);
  std::vector<int64_t> offs(static_cast<std::size_t>(n));
  std::vector<int64_t> idx(out.size(), 0);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    offs[static_cast<std::size_t>(i)] = at;
    for (std::size_t j = out.size(); j-- > 0;) {
      at += step[j];
      if (++idx[j] < out[j]) break;
      at -= step[j] * out[j];
      idx[j] = 0;
    }
  }
  return offs;
}

int64_t to_int(double v) {
  // INT64_MAX ("to the end" in slice bounds) does not survive a double: clamp.
  constexpr double kBig = 4611686018427387904.0;  // 2^62
  if (!(v > -kBig)) return -(int64_t{1} << 62);
  if (!(v < kBig)) return int64_t{1} << 62;
  return static_cast<int64_t>(v);
}

}  // namespace

std::optional<Importer::Dense> Importer::dense(const std::string& name) const { return dense(constant(name)); }

std::optional<Importer::Dense> Importer::dense(const TensorProto* t) const {
  if (!t || t->data_location() == TensorProto::EXTERNAL) return std::nullopt;
  Dense d;
  d.dims = dims(t);
  if (numel_of(d.dims) < 0) return std::nullopt;
  d.type = t->data_type();
  if (d.type == TensorProto::FLOAT || d.type == TensorProto::DOUBLE || d.type == TensorProto::BOOL) {
    auto v = floats(t);
    if (!v) return std::nullopt;
    d.v.assign(v->begin(), v->end());
    if (d.type == TensorProto::DOUBLE) d.type = TensorProto::FLOAT;  // held as float32, as the importer reads it
  } else if (d.type == TensorProto::INT64 || d.type == TensorProto::INT32) {
    auto v = ints(t);
    if (!v) return std::nullopt;
    for (const int64_t x : *v) d.v.push_back(static_cast<double>(x));
  } else {
    return std::nullopt;
  }
  return d;
}

const TensorProto* Importer::store(const Dense& d) {
  TensorProto& out = folded_.emplace_back();
  for (const int64_t x : d.dims) out.add_dims(x);
  if (d.type == TensorProto::INT64 || d.type == TensorProto::INT32) {
    out.set_data_type(d.type);
    for (const double x : d.v) {
      if (d.type == TensorProto::INT64) out.add_int64_data(to_int(x));
      else out.add_int32_data(static_cast<int32_t>(std::clamp<int64_t>(to_int(x), INT32_MIN, INT32_MAX)));
    }
  } else if (d.type == TensorProto::BOOL) {
    out.set_data_type(TensorProto::BOOL);
    for (const double x : d.v) out.add_int32_data(x != 0 ? 1 : 0);
  } else {
    out.set_data_type(TensorProto::FLOAT);
    for (const double x : d.v) out.add_float_data(static_cast<float>(x));
  }
  return &out;
}

void Importer::set_constant(const std::string& name, const Dense& d) { values_[name] = {Value::Constant, -1, store(d)}; }

// Shape (or Size) of an activation: its dims are known exactly.
bool Importer::fold_shape_of(const NodeProto& n, int x) {
  const std::string& type = n.op_type();
  if (type != "Shape" && type != "Size") return false;
  const Op& in = model_.op(x);
  Dense d;
  d.type = TensorProto::INT64;
  if (type == "Size") {
    d.v = {static_cast<double>(in.numel())};
  } else {
    const auto rank = static_cast<int64_t>(in.shape.size());
    auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t b = clamp(attr_int(n, "start", 0)), e = clamp(attr_int(n, "end", rank));
    for (int64_t k = b; k < e; ++k) d.v.push_back(static_cast<double>(in.shape[static_cast<std::size_t>(k)]));
    d.dims = {static_cast<int64_t>(d.v.size())};
  }
  set_constant(out0(n), d);
  return true;
}

bool Importer::fold_constant(const NodeProto& n) {
  const std::string& type = n.op_type();
  std::vector<Dense> in;
  for (int k = 0; k < n.input_size(); ++k) {
    if (n.input(k).empty()) {
      in.emplace_back();  // an omitted optional input: type 0
      continue;
    }
    auto d = dense(n.input(k));
    if (!d) return false;
    in.push_back(std::move(*d));
  }
  auto present = [&](std::size_t k) { return k < in.size() && in[k].type != 0; };
  auto as_ints = [&](std::size_t k) {
    std::vector<int64_t> out;
    for (const double v : in[k].v) out.push_back(to_int(v));
    return out;
  };
  // Axes from the attribute (older opsets) or input k (newer).
  auto axes_of = [&](std::size_t k) -> std::optional<std::vector<int64_t>> {
    if (present(k)) return as_ints(k);
    for (const auto& a : n.attribute())
      if (a.name() == "axes") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    return std::nullopt;
  };
  Dense out;
  std::vector<Dense> outs;  // several outputs (Split)
  if (type == "Identity" && present(0)) {
    out = in[0];
  } else if ((type == "Shape" || type == "Size") && present(0)) {
    out.type = TensorProto::INT64;
    if (type == "Size") {
      out.v = {static_cast<double>(in[0].v.size())};
    } else {
      const auto rank = static_cast<int64_t>(in[0].dims.size());
      auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
      const int64_t b = clamp(attr_int(n, "start", 0)), e = clamp(attr_int(n, "end", rank));
      for (int64_t k = b; k < e; ++k) out.v.push_back(static_cast<double>(in[0].dims[static_cast<std::size_t>(k)]));
      out.dims = {static_cast<int64_t>(out.v.size())};
    }
  } else if (type == "Cast" && present(0)) {
    const auto to = static_cast<int32_t>(attr_int(n, "to", TensorProto::FLOAT));
    out = in[0];
    if (to == TensorProto::BOOL) {
      for (double& v : out.v) v = v != 0 ? 1 : 0;
      out.type = TensorProto::BOOL;
    } else if (to == TensorProto::INT64 || to == TensorProto::INT32) {
      for (double& v : out.v) v = std::trunc(v);
      out.type = to;
    } else if (to == TensorProto::FLOAT || to == TensorProto::DOUBLE) {
      for (double& v : out.v) v = static_cast<float>(v);
      out.type = TensorProto::FLOAT;
    } else {
      return false;
    }
  } else if ((type == "Not" || type == "Neg" || type == "Sqrt" || type == "Abs" || type == "Reciprocal" ||
              type == "Exp" || type == "Log" || type == "Floor" || type == "Ceil" || type == "Relu") &&
             present(0)) {
    out = in[0];
    const bool flt = is_float_type(out.type);
    for (double& v : out.v) {
      if (type == "Not") v = v != 0 ? 0 : 1;
      else if (type == "Neg") v = -v;
      else if (type == "Abs") v = std::fabs(v);
      else if (type == "Relu") v = std::max(v, 0.0);
      else if (type == "Floor") v = std::floor(v);
      else if (type == "Ceil") v = std::ceil(v);
      else if (!flt) return false;
      else if (type == "Sqrt") v = std::sqrt(v);
      else if (type == "Reciprocal") v = 1.0 / v;
      else if (type == "Exp") v = std::exp(v);
      else v = std::log(v);
      if (flt) v = static_cast<float>(v);
    }
  } else if ((type == "Add" || type == "Sub" || type == "Mul" || type == "Div" || type == "Pow" || type == "Max" ||
              type == "Min" || type == "Mod" || type == "Equal" || type == "Less" || type == "Greater" ||
              type == "LessOrEqual" || type == "GreaterOrEqual" || type == "And" || type == "Or" || type == "Xor") &&
             in.size() == 2 && present(0) && present(1)) {
    if (!broadcast_dims({&in[0].dims, &in[1].dims}, out.dims)) return false;
    const auto a = broadcast_offsets(in[0].dims, out.dims), b = broadcast_offsets(in[1].dims, out.dims);
    const bool compare = type == "Equal" || type == "Less" || type == "Greater" || type == "LessOrEqual" ||
                         type == "GreaterOrEqual" || type == "And" || type == "Or" || type == "Xor";
    out.type = compare ? TensorProto::BOOL : in[0].type;
    const bool flt = is_float_type(out.type);
    out.v.resize(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double x = in[0].v[static_cast<std::size_t>(a[i])], y = in[1].v[static_cast<std::size_t>(b[i])];
      double r = 0;
      if (type == "Add") r = x + y;
      else if (type == "Sub") r = x - y;
      else if (type == "Mul") r = x * y;
      else if (type == "Div") {
        if (!flt && y == 0) return false;
        r = flt ? x / y : std::trunc(x / y);
      } else if (type == "Pow") r = std::pow(x, y);
      else if (type == "Max") r = std::max(x, y);
      else if (type == "Min") r = std::min(x, y);
      else if (type == "Mod") {
        if (flt || y == 0) return false;
        r = x - y * std::floor(x / y);  // fmod=0: the sign of the divisor
      } else if (type == "Equal") r = x == y;
      else if (type == "Less") r = x < y;
      else if (type == "Greater") r = x > y;
      else if (type == "LessOrEqual") r = x <= y;
      else if (type == "GreaterOrEqual") r = x >= y;
      else if (type == "And") r = (x != 0) && (y != 0);
      else if (type == "Or") r = (x != 0) || (y != 0);
      else r = (x != 0) != (y != 0);
      out.v[i] = flt ? static_cast<float>(r) : r;
    }
  } else if (type == "Where" && in.size() == 3 && present(0) && present(1) && present(2)) {
    if (!broadcast_dims({&in[0].dims, &in[1].dims, &in[2].dims}, out.dims)) return false;
    const auto c = broadcast_offsets(in[0].dims, out.dims), a = broadcast_offsets(in[1].dims, out.dims),
               b = broadcast_offsets(in[2].dims, out.dims);
    out.type = in[1].type;
    out.v.resize(c.size());
    for (std::size_t i = 0; i < c.size(); ++i)
      out.v[i] = in[0].v[static_cast<std::size_t>(c[i])] != 0 ? in[1].v[static_cast<std::size_t>(a[i])]
                                                               : in[2].v[static_cast<std::size_t>(b[i])];
  } else if ((type == "Unsqueeze" || type == "Squeeze") && present(0)) {
    const auto axes = axes_of(1);
    std::vector<int64_t> dims = in[0].dims;
    if (type == "Unsqueeze") {
      if (!axes) return false;
      const auto rank = static_cast<int64_t>(dims.size() + axes->size());
      if (rank > 64) return false;
      std::vector<bool> inserted(static_cast<std::size_t>(rank), false);
      for (int64_t ax : *axes) {
        if (ax < 0) ax += rank;
        if (ax < 0 || ax >= rank || inserted[static_cast<std::size_t>(ax)]) return false;
        inserted[static_cast<std::size_t>(ax)] = true;
      }
      std::vector<int64_t> nd;
      auto it = dims.begin();
      for (int64_t k = 0; k < rank; ++k) nd.push_back(inserted[static_cast<std::size_t>(k)] ? 1 : *it++);
      dims = std::move(nd);
    } else {
      const auto rank = static_cast<int64_t>(dims.size());
      std::vector<bool> drop(dims.size(), !axes);
      for (int64_t ax : axes.value_or(std::vector<int64_t>{})) {
        if (ax < 0) ax += rank;
        if (ax < 0 || ax >= rank || dims[static_cast<std::size_t>(ax)] != 1) return false;
        drop[static_cast<std::size_t>(ax)] = true;
      }
      std::vector<int64_t> nd;
      for (std::size_t k = 0; k < dims.size(); ++k)
        if (!(drop[k] && dims[k] == 1)) nd.push_back(dims[k]);
      dims = std::move(nd);
    }
    out = in[0];
    out.dims = std::move(dims);
  } else if ((type == "Reshape" || type == "Flatten") && present(0)) {
    const int64_t count = static_cast<int64_t>(in[0].v.size());
    std::vector<int64_t> dims;
    if (type == "Flatten") {
      const auto rank = static_cast<int64_t>(in[0].dims.size());
      int64_t ax = attr_int(n, "axis", 1);
      if (ax < 0) ax += rank;
      if (ax < 0 || ax > rank) return false;
      int64_t lead = 1;
      for (int64_t k = 0; k < ax; ++k) lead *= in[0].dims[static_cast<std::size_t>(k)];
      dims = {lead, lead ? count / lead : 0};
    } else {
      if (!present(1)) return false;
      dims = as_ints(1);
      int64_t known = 1, infer = -1;
      for (std::size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] == 0 && attr_int(n, "allowzero", 0) == 0) {
          if (k >= in[0].dims.size()) return false;
          dims[k] = in[0].dims[k];
        }
        if (dims[k] == -1) {
          if (infer >= 0) return false;
          infer = static_cast<int64_t>(k);
        } else if (dims[k] < 0 || dims[k] > kMaxFoldedElems) {
          return false;
        } else {
          known *= dims[k];
          if (known > kMaxFoldedElems) return false;
        }
      }
      if (infer >= 0) {
        if (known == 0 || count % known) return false;
        dims[static_cast<std::size_t>(infer)] = count / known;
      }
    }
    if (numel_of(dims) != count) return false;
    out = in[0];
    out.dims = std::move(dims);
  } else if ((type == "Expand" || type == "Tile") && present(0) && present(1)) {
    std::vector<int64_t> target = as_ints(1);
    if (type == "Tile") {
      if (target.size() != in[0].dims.size()) return false;
      for (std::size_t k = 0; k < target.size(); ++k) {
        if (target[k] < 0 || (in[0].dims[k] > 0 && target[k] > kMaxFoldedElems / in[0].dims[k])) return false;
        target[k] *= in[0].dims[k];
      }
      if (numel_of(target) < 0) return false;
      const auto st = strides_of(in[0].dims);
      out.dims = target;
      out.type = in[0].type;
      const int64_t total = numel_of(target);
      std::vector<int64_t> idx(target.size(), 0);
      for (int64_t i = 0; i < total; ++i) {
        int64_t at = 0;
        for (std::size_t k = 0; k < target.size(); ++k) at += (idx[k] % in[0].dims[k]) * st[k];
        out.v.push_back(in[0].v[static_cast<std::size_t>(at)]);
        for (std::size_t k = target.size(); k-- > 0;) {
          if (++idx[k] < target[k]) break;
          idx[k] = 0;
        }
      }
    } else {
      if (!broadcast_dims({&in[0].dims, &target}, out.dims)) return false;
      const auto a = broadcast_offsets(in[0].dims, out.dims);
      out.type = in[0].type;
      for (const int64_t o : a) out.v.push_back(in[0].v[static_cast<std::size_t>(o)]);
    }
  } else if (type == "Transpose" && present(0)) {
    const std::size_t rank = in[0].dims.size();
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (std::size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
    if (perm.size() != rank) return false;
    std::vector<bool> seen(rank, false);
    for (const int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<std::size_t>(p)]) return false;
      seen[static_cast<std::size_t>(p)] = true;
    }
    const auto st = strides_of(in[0].dims);
    out.type = in[0].type;
    std::vector<int64_t> step;
    for (const int64_t p : perm) {
      out.dims.push_back(in[0].dims[static_cast<std::size_t>(p)]);
      step.push_back(st[static_cast<std::size_t>(p)]);
    }
    const int64_t total = numel_of(out.dims);
    std::vector<int64_t> idx(rank, 0);
    int64_t at = 0;
    out.v.reserve(static_cast<std::size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
      out.v.push_back(in[0].v[static_cast<std::size_t>(at)]);
      for (std::size_t k = rank; k-- > 0;) {
        at += step[k];
        if (++idx[k] < out.dims[k]) break;
        at -= step[k] * out.dims[k];
        idx[k] = 0;
      }
    }
  } else if (type == "Concat" && !in.empty()) {
    const auto rank = static_cast<int64_t>(in[0].dims.size());
    int64_t ax = attr_int(n, "axis", 0);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return false;
    out.dims = in[0].dims;
    out.dims[static_cast<std::size_t>(ax)] = 0;
    out.type = in[0].type;
    int64_t outer = 1;
    for (int64_t k = 0; k < ax; ++k) outer *= in[0].dims[static_cast<std::size_t>(k)];
    std::vector<int64_t> chunk;  // elements per outer index of each input
    for (const Dense& d : in) {
      if (d.type == 0 || d.dims.size() != in[0].dims.size()) return false;
      for (int64_t k = 0; k < rank; ++k)
        if (k != ax && d.dims[static_cast<std::size_t>(k)] != in[0].dims[static_cast<std::size_t>(k)]) return false;
      out.dims[static_cast<std::size_t>(ax)] += d.dims[static_cast<std::size_t>(ax)];
      chunk.push_back(outer ? static_cast<int64_t>(d.v.size()) / outer : 0);
    }
    if (numel_of(out.dims) < 0) return false;
    for (int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < in.size(); ++k)
        out.v.insert(out.v.end(), in[k].v.begin() + o * chunk[k], in[k].v.begin() + (o + 1) * chunk[k]);
  } else if (type == "Gather" && present(0) && present(1)) {
    const auto rank = static_cast<int64_t>(in[0].dims.size());
    int64_t ax = attr_int(n, "axis", 0);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return false;
    const int64_t d = in[0].dims[static_cast<std::size_t>(ax)];
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < rank; ++k) {
      if (k < ax) outer *= in[0].dims[static_cast<std::size_t>(k)];
      if (k > ax) inner *= in[0].dims[static_cast<std::size_t>(k)];
    }
    out.dims.assign(in[0].dims.begin(), in[0].dims.begin() + ax);
    out.dims.insert(out.dims.end(), in[1].dims.begin(), in[1].dims.end());
    out.dims.insert(out.dims.end(), in[0].dims.begin() + ax + 1, in[0].dims.end());
    if (numel_of(out.dims) < 0) return false;
    out.type = in[0].type;
    for (int64_t o = 0; o < outer; ++o)
      for (const double iv : in[1].v) {
        int64_t i = to_int(iv);
        if (i < 0) i += d;
        if (i < 0 || i >= d) return false;
        for (int64_t k = 0; k < inner; ++k) out.v.push_back(in[0].v[static_cast<std::size_t>((o * d + i) * inner + k)]);
      }
  } else if (type == "Slice" && present(0) && present(1) && present(2)) {
    const auto starts = as_ints(1), ends = as_ints(2);
    std::optional<std::vector<int64_t>> axes, steps;
    if (present(3)) axes = as_ints(3);
    if (present(4)) steps = as_ints(4);
    if (starts.size() != ends.size() || (axes && axes->size() != starts.size()) || (steps && steps->size() != starts.size()))
      return false;
    const std::vector<int64_t>& dims = in[0].dims;
    const auto rank = static_cast<int64_t>(dims.size());
    std::vector<int64_t> begin(dims.size(), 0), step(dims.size(), 1), count = dims;
    for (std::size_t i = 0; i < starts.size(); ++i) {
      int64_t ax = axes ? (*axes)[i] : static_cast<int64_t>(i);
      if (ax < 0) ax += rank;
      if (ax < 0 || ax >= rank) return false;
      const int64_t st = steps ? (*steps)[i] : 1;
      const int64_t d = dims[static_cast<std::size_t>(ax)];
      int64_t b = starts[i] < 0 ? starts[i] + d : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
      if (st > 0) {
        b = std::clamp<int64_t>(b, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
      } else if (st < 0) {
        b = std::clamp<int64_t>(b, -1, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
      } else {
        return false;
      }
      begin[static_cast<std::size_t>(ax)] = b;
      step[static_cast<std::size_t>(ax)] = st;
      count[static_cast<std::size_t>(ax)] = st > 0 ? (e > b ? (e - b + st - 1) / st : 0) : (b > e ? (b - e - st - 1) / -st : 0);
    }
    const auto st = strides_of(dims);
    const int64_t total = numel_of(count);
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t at = 0;
      for (std::size_t a = 0; a < dims.size(); ++a) at += (begin[a] + idx[a] * step[a]) * st[a];
      out.v.push_back(in[0].v[static_cast<std::size_t>(at)]);
      for (std::size_t a = dims.size(); a-- > 0;) {
        if (++idx[a] < count[a]) break;
        idx[a] = 0;
      }
    }
    out.dims = count;
    out.type = in[0].type;
  } else if (type == "ConstantOfShape" && present(0)) {
    out.dims = as_ints(0);
    const int64_t total = numel_of(out.dims);
    if (total < 0) return false;
    out.type = TensorProto::FLOAT;
    double fill = 0;
    for (const auto& a : n.attribute()) {
      if (a.name() != "value" || !a.has_t()) continue;
      auto v = dense(&a.t());
      if (!v || v->v.size() != 1) return false;
      fill = v->v[0];
      out.type = v->type;
    }
    out.v.assign(static_cast<std::size_t>(total), fill);
  } else if (type == "Range" && present(0) && present(1) && present(2)) {
    if (in[0].v.size() != 1 || in[1].v.size() != 1 || in[2].v.size() != 1 || in[2].v[0] == 0) return false;
    const double start = in[0].v[0], limit = in[1].v[0], delta = in[2].v[0];
    const double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (count > static_cast<double>(kMaxFoldedElems)) return false;
    out.type = in[0].type;
    for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) out.v.push_back(start + static_cast<double>(k) * delta);
    out.dims = {static_cast<int64_t>(out.v.size())};
  } else if (type == "Trilu" && present(0) && in[0].dims.size() >= 2) {
    const int64_t k = present(1) && !in[1].v.empty() ? to_int(in[1].v[0]) : 0;
    const bool upper = attr_int(n, "upper", 1) != 0;
    out = in[0];
    const int64_t rows = out.dims[out.dims.size() - 2], cols = out.dims.back();
    for (std::size_t i = 0; i < out.v.size(); ++i) {
      const int64_t c = static_cast<int64_t>(i) % cols, r = (static_cast<int64_t>(i) / cols) % rows;
      const bool keep = upper ? c - r >= k : c - r <= k;
      if (!keep) out.v[i] = 0;
    }
  } else if (type == "Split" && present(0)) {
    const auto rank = static_cast<int64_t>(in[0].dims.size());
    int64_t ax = attr_int(n, "axis", 0);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return false;
    const int64_t d = in[0].dims[static_cast<std::size_t>(ax)];
    std::vector<int64_t> sizes = present(1) ? as_ints(1) : attr_ints(n, "split");
    if (sizes.empty()) {
      const int64_t parts = n.output_size();
      if (parts <= 0 || d % parts) return false;
      sizes.assign(static_cast<std::size_t>(parts), d / parts);
    }
    if (static_cast<int>(sizes.size()) != n.output_size()) return false;
    int64_t at = 0;
    for (const int64_t s : sizes) {
      if (s < 0 || at + s > d) return false;
      Dense slice;
      slice.dims = in[0].dims;
      slice.dims[static_cast<std::size_t>(ax)] = s;
      slice.type = in[0].type;
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < rank; ++k) {
        if (k < ax) outer *= in[0].dims[static_cast<std::size_t>(k)];
        if (k > ax) inner *= in[0].dims[static_cast<std::size_t>(k)];
      }
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t r = at; r < at + s; ++r)
          for (int64_t k = 0; k < inner; ++k) slice.v.push_back(in[0].v[static_cast<std::size_t>((o * d + r) * inner + k)]);
      outs.push_back(std::move(slice));
      at += s;
    }
    if (at != d) return false;
  } else {
    return false;
  }
  if (outs.empty()) {
    if (numel_of(out.dims) != static_cast<int64_t>(out.v.size())) return false;
    set_constant(out0(n), out);
    // An initializer reshaped or broadcast keeps its identity (a Concat of a
    // class token learns the initializer): the shape before any broadcast.
    if ((type == "Expand" || type == "Reshape" || type == "Unsqueeze" || type == "Squeeze" || type == "Identity" ||
         type == "Flatten") && n.input_size() >= 1) {
      const std::string& src = n.input(0);
      auto o = param_origin_.find(src);
      if (o != param_origin_.end()) {
        Origin next = o->second;
        if (type != "Expand") next.shape = out.dims;
        param_origin_[out0(n)] = std::move(next);
      } else if (is_graph_initializer(src)) {
        param_origin_[out0(n)] = {src, type == "Expand" ? in[0].dims : out.dims};
      }
    }
  } else {
    for (std::size_t k = 0; k < outs.size(); ++k)
      if (!n.output(static_cast<int>(k)).empty()) set_constant(n.output(static_cast<int>(k)), outs[k]);
  }
  return true;
}

}  // namespace remat::onnx_import
#endif
