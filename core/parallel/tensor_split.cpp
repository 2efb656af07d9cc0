#include "core/parallel/tensor_split.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/base/errors.h"
#include "core/model/op_rules.h"
#include "core/parallel/block_stages.h"

namespace remat {

namespace {

// How a tensor lies over the t ranks. Whole: each rank holds all of it.
// Heads: divided by a column-parallel Linear (its features, then the heads
// and the (b·heads) batches they become). Seq: sequence parallelism's shard.
// A divided tensor is divided along one axis by one digit of its index:
// index i along `axis` is rank (i / inner) % t's. inner = extent / t is the
// plain split into t contiguous parts; a fused QKV's output is divided in
// each third (inner = h / t), so that each rank's q, k and v are slices of
// its own part, as Megatron-LM lays its weight out.
struct Dist {
  enum Kind : uint8_t { Whole, Heads, Seq } kind = Whole;
  int axis = -1;
  int64_t inner = 0;
  bool padded = false;  // ceil(E / t) a rank (the vocabulary), along the last axis only
  int origin = -1;      // the stage op that divided it, for messages
  bool whole() const { return kind == Whole; }
  bool same(const Dist& o) const { return kind == o.kind && axis == o.axis && inner == o.inner && padded == o.padded; }
};

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

int normalized_axis(int64_t axis, std::size_t rank) {
  return static_cast<int>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

std::string shape_text(const Shape& s) { return shape_string(std::span<const int64_t>(s.data(), s.size())); }

// Where the digit of linear stride `sigma` (t values) falls in `s`: the axis
// and its inner stride there, or axis -1 and the axis the t parts would have
// to divide (bad_axis) when they cut across one.
struct DigitAt {
  int axis = -1;
  int64_t inner = 0;
  int bad_axis = -1;
};

DigitAt digit_at(const Shape& s, int64_t sigma, int64_t t) {
  const std::vector<int64_t> st = strides_of(s);
  DigitAt r;
  for (std::size_t b = 0; b < s.size(); ++b) {
    if (s[b] == 1 || sigma < st[b] || sigma >= st[b] * s[b]) continue;
    if (sigma % st[b] == 0 && s[b] % (sigma / st[b] * t) == 0) {
      r.axis = static_cast<int>(b);
      r.inner = sigma / st[b];
      return r;
    }
    break;
  }
  for (std::size_t b = 0; b < s.size(); ++b)
    if (s[b] > 1 && st[b] < sigma * t && sigma * t <= st[b] * s[b]) {
      r.bad_axis = static_cast<int>(b);
      break;
    }
  return r;
}

uint64_t scaled(uint64_t x, uint64_t num, uint64_t den) {
  return den == 0 ? x : static_cast<uint64_t>(std::ceil(static_cast<long double>(x) * num / den));
}

class Splitter {
 public:
  Splitter(const Model& stage, const StageLayout& layout, int tp, bool sp, const std::string& label)
      : stage_(stage), layout_(layout), t_(tp), sp_(sp), label_(label) {}

  Model run() {
    const int n = stage_.size();
    id_.assign(static_cast<std::size_t>(n), -1);
    dist_.assign(static_cast<std::size_t>(n), Dist{});
    gathered_.assign(static_cast<std::size_t>(n), -1);
    m_.name = stage_.name + " rank (" + spec_text() + ")";
    const int begin = layout_.blocks.front().first, end = layout_.blocks.back().last;
    if (sp_) prepare_sequence(begin - 1);
    const int scatter_at = sp_ && layout_.first_stage ? scatter_point(begin) : -1;
    std::size_t block = 0;
    for (int v = 0; v < n; ++v) {
      region_ = v < begin ? Region::Before : v <= end ? Region::Block : Region::After;
      if (v == 0) {
        input(sp_ && (!layout_.first_stage || scatter_at == 0));
      } else if (!layout_.last_stage && v == n - 1) {
        send(v);
      } else {
        visit(v);
        if (v == scatter_at) scatter(v);
      }
      if (block < layout_.blocks.size() && v == layout_.blocks[block].last) block_end(block++);
    }
    m_.finalize();
    return std::move(m_);
  }

 private:
  enum class Region { Before, Block, After };

  std::string spec_text() const { return "tp=" + std::to_string(t_) + (sp_ ? ",sp" : ""); }
  std::string prefix() const { return "--parallel " + spec_text() + " on '" + label_ + "': "; }
  std::string op_text(int v) const {
    const Op& o = stage_.op(v);
    return "op '" + o.name + "' (" + std::string(kind_name(o.kind)) + " " + shape_text(o.shape) + ")";
  }
  [[noreturn]] void fail(int v, const std::string& why) const { throw InputError(prefix() + op_text(v) + ": " + why); }
  std::string origin_text(const Dist& d) const {
    if (d.kind == Dist::Seq) return "sequence parallelism";
    return d.origin >= 0 ? "the column-parallel '" + stage_.op(d.origin).name + "'" : "a column-parallel Linear";
  }
  std::string divided_text(const Dist& d) const {
    return "divided along axis " + std::to_string(d.axis) + " by " + origin_text(d);
  }

  Shape local_shape(const Shape& full, const Dist& d) const {
    Shape s = full;
    if (d.whole()) return s;
    const int64_t e = s[static_cast<std::size_t>(d.axis)];
    s[static_cast<std::size_t>(d.axis)] = d.padded ? (e + t_ - 1) / t_ : e / t_;
    return s;
  }

  // ---- sequence parallelism: the sequence is the axis before the features
  // of the blocks' input; a tensor of as many rows holds s/t of them.
  void prepare_sequence(int cut) {
    const Op& c = stage_.op(cut);
    if (c.shape.size() < 2)
      throw InputError(prefix() + "sequence parallelism divides the sequence, the axis before the features of the blocks' input " +
                       op_text(cut) + ", which has none");
    seq_ = c.shape[c.shape.size() - 2];
    if (seq_ % t_ != 0)
      throw InputError(prefix() + "tp=" + std::to_string(t_) + " does not divide the sequence length " + std::to_string(seq_) +
                       " (axis " + std::to_string(c.shape.size() - 2) + " of the blocks' input " + op_text(cut) + ")");
    rows_ = c.rows();
  }
  Dist seq_dist(int v, const Shape& s) const {
    const int64_t cols = s.empty() ? 1 : s.back();
    if (numel_of(s) / cols != rows_)
      fail(v, "sequence parallelism divides the " + std::to_string(rows_) + " rows of the blocks' input; this tensor has " +
                  std::to_string(numel_of(s) / cols));
    const DigitAt at = digit_at(s, seq_ / t_ * cols, t_);
    if (at.axis < 0) fail(v, "its rows do not hold the sequence as the blocks' input does, so it cannot be divided along it");
    return {.kind = Dist::Seq, .axis = at.axis, .inner = at.inner};
  }
  // Where the embedding's output is scattered over the sequence: after the
  // last op before the blocks that holds weights (the token and position
  // embeddings' sum, as the presets' reduce-scatter); the Input itself
  // (given its shard) when the blocks start from it.
  int scatter_point(int begin) const {
    for (int v = begin - 1; v >= 1; --v)
      if (stage_.op(v).param_bytes > 0) return v;
    if (begin - 1 == 0 && is_integer(stage_.op(0).dtype))
      throw InputError(prefix() + "the blocks start from the integer input " + op_text(0) + ", which has no sequence to divide");
    return begin - 1;
  }

  // ---- ops
  void input(bool shard) {
    Op o = stage_.op(0);
    Dist d;
    if (shard) d = seq_dist(0, o.shape);
    o.shape = local_shape(o.shape, d);
    o.bytes = 0;
    o.param_init.reset();
    dist_[0] = d;
    id_[0] = m_.add(std::move(o), "op '" + stage_.op(0).name + "'", true);
  }
  void send(int v) {
    Op o = stage_.op(v);
    for (int& x : o.inputs) x = id_[static_cast<std::size_t>(x)];
    o.saved = {};
    id_[static_cast<std::size_t>(v)] = m_.add(std::move(o), {}, true);
  }
  int gathered(int u, const std::string& linear) {
    int& g = gathered_[static_cast<std::size_t>(u)];
    if (g >= 0) return g;
    Op o;
    o.kind = OpKind::Generic;
    o.name = linear + ".all_gather";
    o.dtype = stage_.op(u).dtype;
    o.shape = stage_.op(u).shape;
    o.inputs = {id_[static_cast<std::size_t>(u)]};
    o.saved = {id_[static_cast<std::size_t>(u)]};  // its shard: the Linear's backward gathers it again
    g = m_.add(std::move(o), {}, true);
    return g;
  }
  // A reduce-scatter (keeps nothing) after op v: from here its readers hold s/t.
  void reduce_scatter(int v, const std::string& name) {
    const Op& full = stage_.op(v);
    const Dist d = seq_dist(v, full.shape);
    Op o;
    o.kind = OpKind::Generic;
    o.name = name;
    o.dtype = full.dtype;
    o.shape = local_shape(full.shape, d);
    o.inputs = {id_[static_cast<std::size_t>(v)]};
    id_[static_cast<std::size_t>(v)] = m_.add(std::move(o), {}, true);
    dist_[static_cast<std::size_t>(v)] = d;
  }
  void scatter(int v) {
    std::string name = stage_.op(v).name + ".reduce_scatter";
    for (int u = 1; u <= v; ++u)
      if (stage_.op(u).kind == OpKind::Embedding) {
        name = stage_.op(u).name + ".reduce_scatter";
        break;
      }
    reduce_scatter(v, name);
  }

  void block_end(std::size_t b) {
    const StageLayout::Range& r = layout_.blocks[b];
    const std::string which = "block " + std::to_string(layout_.first_block + static_cast<int>(b)) + " ('" +
                              stage_.op(r.first).name + "' .. '" + stage_.op(r.last).name + "')";
    if (columns_ == 0 || rows_split_ == 0)
      throw InputError(prefix() + which + " has " +
                       (columns_ == 0 ? std::string("no Linear") : std::string("no row-parallel Linear")) +
                       ": tensor parallelism divides a block's column-parallel Linears (attention Q, K, V, the MLP's up "
                       "and gate) and brings their split back whole with row-parallel ones (the attention's output "
                       "projection, the MLP's down), as Megatron-LM does, and this block has no such pair");
    const Dist& d = dist_[static_cast<std::size_t>(r.last)];
    if (d.kind == Dist::Heads)
      throw InputError(prefix() + which + " ends in " + op_text(r.last) + ", which is still " + divided_text(d) +
                       ": no row-parallel Linear brings it back whole before the next block");
    columns_ = rows_split_ = 0;
  }

  // The slices along a column-parallel Linear's output features (through
  // reshapes that keep them) say how its output is laid out: a fused QKV's
  // three parts are each divided (period h), else the whole (period E).
  int64_t slice_period(int v, int64_t period) const {
    const int64_t e = stage_.op(v).shape.back();
    for (int c : stage_.consumers(v)) {
      const Op& o = stage_.op(c);
      if (o.kind == OpKind::Reshape && !o.shape.empty() && o.shape.back() == e) {
        period = slice_period(c, period);
      } else if (o.kind == OpKind::Slice && o.attrs->step == 1 &&
                 normalized_axis(o.attrs->axis, stage_.op(v).shape.size()) == static_cast<int>(stage_.op(v).shape.size()) - 1) {
        auto clampi = [&](int64_t i) { return std::clamp(i < 0 ? i + e : i, int64_t{0}, e); };
        period = std::gcd(period, std::gcd(clampi(o.attrs->start), clampi(o.attrs->end)));
      }
    }
    return period;
  }

  // The op's divided constant (a rotary table, a mask, a learned scale or
  // position table that spans the divided axis): rank 0's share of it.
  void slice_const(int v, Op& o, std::size_t out_rank, const Dist& d) const {
    OpAttrs a = *o.attrs;
    const std::size_t cr = a.const_shape.size();
    const int c = d.axis - static_cast<int>(out_rank - cr);
    if (c < 0 || a.const_shape[static_cast<std::size_t>(c)] == 1) return;
    if (d.padded) fail(v, "its constant spans the vocabulary divided by " + origin_text(d));
    const int64_t e = a.const_shape[static_cast<std::size_t>(c)];
    if (e % (d.inner * t_) != 0) fail(v, "its constant's axis " + std::to_string(c) + " (" + std::to_string(e) + ") does not divide as the tensor does");
    int64_t count = 1;
    for (int64_t x : a.const_shape) count *= x;
    if (a.values.size() == static_cast<std::size_t>(count)) {
      int64_t outer = 1, in = 1;
      for (int i = 0; i < c; ++i) outer *= a.const_shape[static_cast<std::size_t>(i)];
      for (std::size_t i = static_cast<std::size_t>(c) + 1; i < cr; ++i) in *= a.const_shape[i];
      auto kept = std::make_shared<std::vector<float>>();
      kept->reserve(static_cast<std::size_t>(outer * (e / t_) * in));
      const float* src = a.values.data();
      for (int64_t p = 0; p < outer; ++p)
        for (int64_t i = 0; i < e; ++i)
          if ((i / d.inner) % t_ == 0) kept->insert(kept->end(), src + (p * e + i) * in, src + (p * e + i + 1) * in);
      a.values = ConstValues{std::move(kept)};
    }
    a.const_shape[static_cast<std::size_t>(c)] = e / t_;
    o.attrs = a;
  }

  // Element-wise ops (broadcast as PyTorch does): every divided operand
  // divided alike, the whole ones not spanning the divided axis.
  Dist elementwise(int v) const {
    const Op& o = stage_.op(v);
    const std::size_t r = o.shape.size();
    Dist out;
    for (int u : o.inputs) {
      const Dist& d = dist_[static_cast<std::size_t>(u)];
      if (d.whole()) continue;
      Dist a = d;
      a.axis = d.axis + static_cast<int>(r - stage_.op(u).shape.size());
      if (out.whole()) out = a;
      else if (!out.same(a)) fail(v, "it combines tensors divided differently (" + divided_text(out) + ", and " + divided_text(a) + ")");
    }
    if (out.whole()) return out;
    for (int u : o.inputs) {
      const Op& x = stage_.op(u);
      const int k = out.axis - static_cast<int>(r - x.shape.size());
      if (dist_[static_cast<std::size_t>(u)].whole() && k >= 0 && x.shape[static_cast<std::size_t>(k)] > 1)
        fail(v, "it combines a tensor " + divided_text(out) + " with '" + x.name + "', which every rank holds whole");
    }
    return out;
  }

  Dist matmul(int v) const {
    const Op& o = stage_.op(v);
    const std::size_t r = o.shape.size();
    const Dist &a = dist_[static_cast<std::size_t>(o.inputs[0])], &b = dist_[static_cast<std::size_t>(o.inputs[1])];
    const Op &x = stage_.op(o.inputs[0]), &y = stage_.op(o.inputs[1]);
    const int ra = static_cast<int>(x.shape.size()), rb = static_cast<int>(y.shape.size());
    if (a.whole() && b.whole()) return a;
    // Divided batches: each rank multiplies its heads.
    const bool a_batch = !a.whole() && a.axis < ra - 2, b_batch = !b.whole() && b.axis < rb - 2;
    if (a_batch || b_batch) {
      Dist out = a_batch ? a : b;
      out.axis = (a_batch ? a.axis + static_cast<int>(r) - ra : b.axis + static_cast<int>(r) - rb);
      for (int k = 0; k < 2; ++k) {
        const Dist& d = k == 0 ? a : b;
        const Op& z = k == 0 ? x : y;
        const int at = out.axis - static_cast<int>(r - z.shape.size());
        if (!d.whole()) {
          Dist aligned = d;
          aligned.axis = d.axis + static_cast<int>(r - z.shape.size());
          if (!aligned.same(out)) fail(v, "a product of tensors divided differently (" + divided_text(a) + ", and " + divided_text(b) + ")");
        } else if (at >= 0 && z.shape[static_cast<std::size_t>(at)] > 1) {
          fail(v, "it multiplies a tensor " + divided_text(out) + " by '" + z.name + "', which every rank holds whole");
        }
      }
      return out;
    }
    if (!a.whole() && b.whole() && a.axis == ra - 2) {  // rows of the left operand
      Dist out = a;
      out.axis = static_cast<int>(r) - 2;
      return out;
    }
    if (a.whole() && !b.whole() && b.axis == rb - 1) {  // columns of the right one
      Dist out = b;
      out.axis = static_cast<int>(r) - 1;
      return out;
    }
    fail(v, "a product over the divided axis (" + divided_text(a.whole() ? b : a) + "): a partial sum, which only a row-parallel Linear makes");
  }

  void visit(int v) {
    const Op& o = stage_.op(v);
    Op n = rule_fields(o);  // inputs and shape become the rank's below
    n.simulate_only = o.simulate_only;
    n.name = o.name;
    n.param_init = o.param_init;
    n.inputs.clear();
    for (int x : o.inputs) n.inputs.push_back(id_[static_cast<std::size_t>(x)]);
    constexpr int kSelf = -2;  // an op may save its own output: its id is known once the ops it adds ahead of it are
    for (int s : o.saved) n.saved.push_back(s == v ? kSelf : id_[static_cast<std::size_t>(s)]);
    const Dist in0 = o.inputs.empty() ? Dist{} : dist_[static_cast<std::size_t>(o.inputs[0])];
    bool any_divided = false;
    for (int x : o.inputs) any_divided = any_divided || !dist_[static_cast<std::size_t>(x)].whole();
    const std::size_t rank = o.shape.size();
    Dist out;
    bool row = false, sp_column = false;
    switch (o.kind) {
      case OpKind::Linear:
      case OpKind::Dense: {
        if (region_ == Region::Before) {
          if (any_divided) fail(v, "a Linear before the blocks reads a tensor " + divided_text(in0));
          break;  // whole on every rank
        }
        if (in0.kind != Dist::Heads) {  // column-parallel: output features divided
          const int64_t e = o.shape.back();
          out = {.kind = Dist::Heads, .axis = static_cast<int>(rank) - 1, .inner = 0, .origin = v};
          if (e % t_ != 0) {
            if (region_ == Region::Block)
              fail(v, "tp=" + std::to_string(t_) + " does not divide its " + std::to_string(e) +
                          " output features (a column-parallel Linear: each rank computes a t-th of them)");
            out.padded = true;  // the head over the vocabulary: Megatron pads V to a multiple of t
            out.inner = (e + t_ - 1) / t_;
          } else {
            const int64_t period = slice_period(v, e);
            if (period % t_ != 0)
              fail(v, "its output is sliced in parts of " + std::to_string(period) + " features, which tp=" + std::to_string(t_) +
                          " does not divide (each rank takes a t-th of each part)");
            out.inner = period / t_;
          }
          if (in0.kind == Dist::Seq) {  // sp: the gathered input; the Linear keeps nothing
            sp_column = true;
            n.inputs = {gathered(o.inputs[0], o.name)};
            n.saved.clear();
          }
          ++columns_;
        } else if (o.kind == OpKind::Linear && !in0.padded && in0.axis == static_cast<int>(stage_.op(o.inputs[0]).shape.size()) - 1) {
          row = true;  // row-parallel: input features divided, the full output all-reduced in place
          ++rows_split_;
        } else {
          fail(v, o.kind == OpKind::Dense ? "a fused Linear and activation cannot be row-parallel (its activation would read a partial sum)"
                                          : "it reads a tensor " + divided_text(in0) + ", not along its input features");
        }
        if (!out.whole() || row) n.param_init.reset();
        break;
      }
      case OpKind::Embedding:
        if (any_divided) fail(v, "its ids are " + divided_text(in0));
        n.attrs.edit().vocab = (o.attrs->vocab + t_ - 1) / t_;  // vocabulary-parallel, the output all-reduced whole
        n.param_init.reset();
        break;
      case OpKind::ReLU:
      case OpKind::GELU:
      case OpKind::Tanh:
      case OpKind::Sigmoid:
      case OpKind::SiLU:
      case OpKind::Dropout:
      case OpKind::Add:
      case OpKind::Pointwise:
      case OpKind::MulConst:
      case OpKind::DivConst:
      case OpKind::AddConst:
      case OpKind::MaskedFill:
        out = elementwise(v);
        if (!out.whole() && !o.attrs->const_shape.empty() &&
            (o.kind != OpKind::Pointwise || o.attrs->const_at >= 0))
          slice_const(v, n, rank, out);
        break;
      case OpKind::LayerNorm:
        if (!in0.whole() && in0.axis == static_cast<int>(rank) - 1)
          fail(v, "it normalises the features, which are " + divided_text(in0));
        out = in0;
        break;
      case OpKind::GlobalAvgPool:
        if (!in0.whole() && in0.axis >= 2) fail(v, "it averages over axis " + std::to_string(in0.axis) + ", which is " + divided_text(in0));
        out = in0;
        break;
      case OpKind::Softmax:
        if (!in0.whole() && normalized_axis(o.attrs->axis, rank) == in0.axis)
          fail(v, "a softmax along axis " + std::to_string(in0.axis) + ", which is " + divided_text(in0));
        out = in0;
        break;
      case OpKind::Reduce: {
        out = in0;
        if (in0.whole()) break;
        const auto& axes = o.attrs->axes;
        if (axes.empty() || std::find(axes.begin(), axes.end(), in0.axis) != axes.end())
          fail(v, "it reduces axis " + std::to_string(in0.axis) + ", which is " + divided_text(in0));
        if (!o.attrs->keepdim)
          out.axis -= static_cast<int>(std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return a < in0.axis; }));
        break;
      }
      case OpKind::Transpose:
        out = in0;
        if (!in0.whole())
          for (std::size_t b = 0; b < o.attrs->perm.size(); ++b)
            if (o.attrs->perm[b] == in0.axis) out.axis = static_cast<int>(b);
        break;
      case OpKind::Reshape: {
        out = in0;
        if (in0.whole()) break;
        const Shape& from = stage_.op(o.inputs[0]).shape;
        if (in0.padded) {
          if (in0.axis != static_cast<int>(from.size()) - 1 || o.shape.back() != from.back())
            fail(v, "it reshapes the padded vocabulary divided by " + origin_text(in0));
          out.axis = static_cast<int>(rank) - 1;
          break;
        }
        const DigitAt at = digit_at(o.shape, strides_of(from)[static_cast<std::size_t>(in0.axis)] * in0.inner, t_);
        if (at.axis < 0) {
          const std::string axis = at.bad_axis < 0 ? std::string("its axes")
                                                   : "its axis " + std::to_string(at.bad_axis) + " (" +
                                                         std::to_string(o.shape[static_cast<std::size_t>(at.bad_axis)]) + ")";
          fail(v, "tp=" + std::to_string(t_) + " does not divide " + axis + ", across which it would cut the tensor " +
                      divided_text(in0) + (in0.kind == Dist::Heads ? ": each rank must hold whole heads" : ""));
        }
        out.axis = at.axis;
        out.inner = at.inner;
        break;
      }
      case OpKind::Expand: {
        out = in0;
        if (in0.whole()) break;
        const Shape& from = stage_.op(o.inputs[0]).shape;
        out.axis = in0.axis + static_cast<int>(rank - from.size());
        if (o.shape[static_cast<std::size_t>(out.axis)] != from[static_cast<std::size_t>(in0.axis)])
          fail(v, "it broadcasts axis " + std::to_string(in0.axis) + ", which is " + divided_text(in0));
        break;
      }
      case OpKind::Slice: {
        out = in0;
        const int ax = normalized_axis(o.attrs->axis, rank);
        if (in0.whole() || ax != in0.axis) break;
        const int64_t dim = stage_.op(o.inputs[0]).shape[static_cast<std::size_t>(ax)];
        auto clampi = [&](int64_t i) { return std::clamp(i < 0 ? i + dim : i, int64_t{0}, dim); };
        const int64_t b = clampi(o.attrs->start), e = clampi(o.attrs->end), period = in0.inner * t_;
        if (in0.padded || o.attrs->step != 1 || b % period != 0 || e % period != 0)
          fail(v, "it slices [" + std::to_string(b) + ", " + std::to_string(e) + ") of axis " + std::to_string(ax) + ", which is " +
                      divided_text(in0) + " in parts of " + std::to_string(in0.inner) + " (each rank's slice would not be its own)");
        n.attrs.edit().start = b / t_;
        n.attrs.edit().end = e / t_;
        break;
      }
      case OpKind::Concat: {
        out = elementwise(v);
        if (out.whole()) break;
        if (normalized_axis(o.attrs->axis, rank) == out.axis)
          fail(v, "it concatenates along axis " + std::to_string(out.axis) + ", which is " + divided_text(out));
        if (o.attrs->const_at >= 0) slice_const(v, n, rank, out);
        break;
      }
      case OpKind::MatMul:
        out = matmul(v);
        break;
      case OpKind::Attention: {
        out = in0;
        if (!any_divided) break;
        for (int x : o.inputs) {
          const Dist& d = dist_[static_cast<std::size_t>(x)];
          if (!d.same(in0) || d.axis >= static_cast<int>(rank) - 2)
            fail(v, "attention needs q, k and v divided alike along their heads (q is " +
                        (in0.whole() ? std::string("whole") : divided_text(in0)) + ", '" + stage_.op(x).name + "' " +
                        (d.whole() ? std::string("whole") : divided_text(d)) + ")");
        }
        if (!o.attrs->const_shape.empty()) slice_const(v, n, rank, out);
        break;
      }
      case OpKind::SoftmaxCELoss:
        // Over a vocabulary divided along its classes: Megatron-LM's
        // vocabulary-parallel cross-entropy, each rank its share.
        if (in0.kind == Dist::Heads && in0.axis != static_cast<int>(stage_.op(o.inputs[0]).shape.size()) - 1)
          fail(v, "a cross-entropy over a tensor " + divided_text(in0) + ", not along its classes");
        break;
      case OpKind::MSELoss:
      case OpKind::BCEWithLogitsLoss:
        if (in0.kind == Dist::Heads) fail(v, "a loss over a tensor " + divided_text(in0));
        break;
      default:
        if (any_divided) {
          for (int x : o.inputs)
            if (!dist_[static_cast<std::size_t>(x)].whole())
              fail(v, "it reads '" + stage_.op(x).name + "', which is " + divided_text(dist_[static_cast<std::size_t>(x)]) +
                          ", and remat does not know how a " + std::string(kind_name(o.kind)) + " splits over the ranks");
        }
        break;
    }
    if (is_loss(o.kind)) out = Dist{};
    if (!out.whole() || any_divided) n.param_init.reset();
    n.shape = local_shape(o.shape, out);
    for (int& s : n.saved)
      if (s == kSelf) s = m_.size();
    explicit_fields(v, n, sp_column);
    const int id = m_.add(std::move(n), "op '" + o.name + "' of " + m_.name, true);
    id_[static_cast<std::size_t>(v)] = id;
    dist_[static_cast<std::size_t>(v)] = out;
    if (row && sp_) reduce_scatter(v, o.name + ".reduce_scatter");
  }

  // What the file gave beyond the rules (a capture's costs, a contiguous
  // copy or log-probabilities in aux), for the rank's shapes: sizes and costs
  // by the rank's share of the output (a loss: of its input); an aux by
  // whole copies of the first input, each the rank's, plus the rest (a
  // wrapped scalar) as it is. Everything the rules give is derived again.
  void explicit_fields(int v, Op& n, bool sp_column) const {
    const Op& o = stage_.op(v);
    const Op probe = derived_by_rules(o, stage_.ops().first(static_cast<std::size_t>(v)), "op '" + o.name + "'");
    const bool loss = is_loss(o.kind);
    const uint64_t out_full = static_cast<uint64_t>(numel_of(o.shape)), out_local = static_cast<uint64_t>(numel_of(n.shape));
    const uint64_t in_full = o.inputs.empty() ? 0 : stage_.op(o.inputs[0]).logical_bytes();
    const uint64_t in_local = n.inputs.empty() ? 0 : m_.op(n.inputs[0]).logical_bytes();
    const uint64_t num = loss ? in_local : out_local, den = loss ? in_full : out_full;
    n.bytes = o.bytes != probe.bytes ? scaled(o.bytes, out_local, out_full) : 0;
    n.fwd_flops = o.fwd_flops != probe.fwd_flops && o.fwd_flops > 0 ? o.fwd_flops * static_cast<double>(num) / static_cast<double>(den) : 0;
    n.bwd_flops = o.bwd_flops != probe.bwd_flops && o.bwd_flops > 0 ? o.bwd_flops * static_cast<double>(num) / static_cast<double>(den) : 0;
    n.param_bytes = o.param_bytes != probe.param_bytes && o.param_bytes > 0 ? scaled(o.param_bytes, out_local, out_full) : 0;
    n.aux_bytes = 0;
    if (!sp_column && o.aux_bytes != probe.aux_bytes && o.aux_bytes > 0)
      n.aux_bytes = in_full == 0 ? o.aux_bytes : o.aux_bytes / in_full * in_local + o.aux_bytes % in_full;
  }

  const Model& stage_;
  const StageLayout& layout_;
  const int64_t t_;
  const bool sp_;
  const std::string& label_;
  Model m_;
  std::vector<int> id_;        // stage op -> the rank's op holding its tensor
  std::vector<Dist> dist_;     // per stage op
  std::vector<int> gathered_;  // per stage op: its all-gather under sp, once
  Region region_ = Region::Before;
  int64_t seq_ = 0, rows_ = 0;
  int columns_ = 0, rows_split_ = 0;  // the current block's column- and row-parallel Linears
};

}  // namespace

Model split_tensor_parallel(const Model& stage, const StageLayout& layout, int tp, bool sp, const std::string& label) {
  if (layout.blocks.empty()) throw InputError("--parallel on '" + label + "': a stage without blocks");
  return Splitter(stage, layout, tp, sp, label).run();
}

}  // namespace remat

namespace remat {

Model file_rank_model(const Model& model, const std::vector<Block>& run, const RankSlice& slice, const std::string& label) {
  Model stage = block_stage_model(model, run, slice.first_block, slice.blocks, slice.first_stage, slice.last_stage);
  if (slice.tp == 1 && !slice.sp) return stage;
  // block_stage_model keeps the ops' order: a stage that is not the first
  // starts with recv in place of everything before its first block.
  const int offset = slice.first_stage ? 0 : run[static_cast<std::size_t>(slice.first_block)].first - 1;
  StageLayout layout{.blocks = {}, .first_block = slice.first_block, .first_stage = slice.first_stage, .last_stage = slice.last_stage};
  for (int j = slice.first_block; j < slice.first_block + slice.blocks; ++j) {
    const Block& b = run[static_cast<std::size_t>(j)];
    layout.blocks.push_back({.first = b.first - offset, .last = b.last - offset});
  }
  return split_tensor_parallel(stage, layout, slice.tp, slice.sp, label);
}

}  // namespace remat
