// The pointwise family (pointwise_fns.h) and the reductions, each one loop
// over a broadcast index: operands are read through element strides (a
// broadcast or repeated dimension has stride 0, a view its own strides), the
// output and the gradients are contiguous. A gradient of an operand that
// broadcasts sums, per element of that operand, its output positions in
// row-major order, in double: the order the CUDA kernels use too.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

constexpr int kR = PwGeom::kMaxRank;

// Element offsets of several tensors walked together over one index space,
// last dimension fastest. Dimensions every stream walks as one are merged.
template <int S>
struct Walk {
  int rank = 0;
  int64_t n[kR] = {};
  int64_t st[S][kR] = {};

  void add_dim(int64_t size, const int64_t (&strides)[S]) {
    if (size == 1) return;
    if (rank > 0) {
      bool merge = true;
      for (int s = 0; s < S; ++s) merge = merge && st[s][rank - 1] == strides[s] * size;
      if (merge) {
        n[rank - 1] *= size;
        for (int s = 0; s < S; ++s) st[s][rank - 1] = strides[s];
        return;
      }
    }
    n[rank] = size;
    for (int s = 0; s < S; ++s) st[s][rank] = strides[s];
    ++rank;
  }
  int64_t count() const {
    int64_t c = 1;
    for (int d = 0; d < rank; ++d) c *= n[d];
    return c;
  }
  // Calls f(off) for each index with off[s] = base[s] + Σ idx·st[s].
  template <class F>
  void run(const int64_t (&base)[S], F f) const {
    int64_t off[S];
    for (int s = 0; s < S; ++s) off[s] = base[s];
    const int64_t total = count();
    int64_t idx[kR] = {};
    for (int64_t i = 0; i < total; ++i) {
      f(off);
      for (int d = rank; d-- > 0;) {
        for (int s = 0; s < S; ++s) off[s] += st[s][d];
        if (++idx[d] < n[d]) break;
        for (int s = 0; s < S; ++s) off[s] -= st[s][d] * n[d];
        idx[d] = 0;
      }
    }
  }
};

void check_geom(const PwGeom& g, const char* fn) {
  if (g.rank < 0 || g.rank > kR) throw std::invalid_argument(std::string(fn) + ": rank " + std::to_string(g.rank) + " is over 8");
  if (g.arity < 1 || g.arity > 3) throw std::invalid_argument(std::string(fn) + ": arity " + std::to_string(g.arity));
  if (static_cast<int>(g.fn) >= pw::kFnCount)
    throw std::invalid_argument(std::string(fn) + ": unknown function " + std::to_string(static_cast<int>(g.fn)));
  for (int d = 0; d < g.rank; ++d)
    if (g.shape[d] < 0) throw std::invalid_argument(std::string(fn) + ": negative size");
}

// Row-major strides of the output, and of operand k's own (broadcast) shape.
void out_strides(const PwGeom& g, int64_t (&s)[kR]) {
  int64_t at = 1;
  for (int d = g.rank; d-- > 0;) s[d] = at, at *= g.shape[d];
}
void fwd_out_strides(const PwGeom& g, int64_t (&s)[kR]) {
  out_strides(g, s);
  if (g.out_strided)
    for (int d = 0; d < g.rank; ++d) s[d] = g.out_stride[d];
}
void own_strides(const PwGeom& g, int k, int64_t (&s)[kR]) {
  int64_t at = 1;
  for (int d = g.rank; d-- > 0;) s[d] = at, at *= g.dims[k][d];
}

// A derivative's operand it does not read (null) is read as this zero, through stride 0.
constexpr float kZero = 0.0f;

// The functions the loops evaluate: f(a, b, c) for the forward, f(a, b, c, y, g)
// for the derivative with respect to operand K. pw::forward and pw::backward
// switch on the function at run time and GCC inlines them at some call sites
// only, so each function's expressions are written out here instead, one
// struct each, from the same table: the same expressions in float, found in
// namespace pw as there, without a call and a switch per element.
}  // namespace
}  // namespace remat::cpu

namespace remat::pw::rows {
template <Fn F>
struct FwdFn;
template <Fn F, int K>
struct BwdFn;
#define REMAT_PW_ROWS(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2)                                      \
  template <>                                                                                                     \
  struct FwdFn<Fn::Name> {                                                                                        \
    using T = float;                                                                                              \
    float p, q;                                                                                                   \
    float operator()([[maybe_unused]] T a, [[maybe_unused]] T b, [[maybe_unused]] T c) const { return fwd; }      \
  };                                                                                                              \
  template <int K>                                                                                                \
  struct BwdFn<Fn::Name, K> {                                                                                     \
    using T = float;                                                                                              \
    float p, q;                                                                                                   \
    float operator()([[maybe_unused]] T a, [[maybe_unused]] T b, [[maybe_unused]] T c, [[maybe_unused]] T y,      \
                     [[maybe_unused]] T g) const {                                                                \
      if constexpr (K == 0) return g0;                                                                            \
      else if constexpr (K == 1) return g1;                                                                       \
      else return g2;                                                                                             \
    }                                                                                                             \
  };
REMAT_POINTWISE_FNS(REMAT_PW_ROWS)
#undef REMAT_PW_ROWS
}  // namespace remat::pw::rows

namespace remat::cpu {
namespace {

template <pw::Fn F>
using FwdFn = pw::rows::FwdFn<F>;
template <pw::Fn F, int K>
using BwdFn = pw::rows::BwdFn<F, K>;

// Pow by a scalar 2 (x.pow(2): RMSNorm's, a variance's) as PyTorch computes
// it: a*a, and its derivative g*2*a (PyTorch's pow kernel squares for an
// exponent of 2 and pow_backward's self.pow(1) is self). pw::forward's
// powf(a, 2) is a call per element, and glibc's powf is not correctly rounded:
// in every binade it rounds 6061 of the 2^23 squares one unit away from a*a
// (0x1.001p-63 squared is a tie, powf rounds it up), so a*a is also
// PyTorch's value where powf was not. The exponent's gradient keeps the formula.
bool uniform(const PwGeom& g, int k) {
  for (int d = 0; d < g.rank; ++d)
    if (g.shape[d] != 1 && g.stride[k][d] != 0) return false;
  return true;
}
struct SquareFwd {
  float operator()(float a, float, float) const { return a * a; }
};
struct SquareBwd {  // pow_grad_self(a, 2, g) = g * 2 * pow(a, 1)
  float operator()(float a, float b, float, float, float g) const { return g * b * a; }
};

template <class Fwd>
void fwd_rows(const PwGeom& g, const float* const x[3], float* y, Fwd fn) {
  int64_t os[kR];
  fwd_out_strides(g, os);
  Walk<4> w;
  for (int d = 0; d < g.rank; ++d) w.add_dim(g.shape[d], {g.stride[0][d], g.stride[1][d], g.stride[2][d], os[d]});
  const float* a = x[0];
  const float* b = x[1];
  const float* c = x[2];
  // The innermost dimension as a plain loop (one function, no switch per element).
  Walk<4> outer;
  for (int d = 0; d + 1 < w.rank; ++d) outer.add_dim(w.n[d], {w.st[0][d], w.st[1][d], w.st[2][d], w.st[3][d]});
  const int64_t n = w.rank ? w.n[w.rank - 1] : 1;
  const int64_t sa = w.rank ? w.st[0][w.rank - 1] : 0, sb = w.rank ? w.st[1][w.rank - 1] : 0;
  const int64_t sc = w.rank ? w.st[2][w.rank - 1] : 0, sy = w.rank ? w.st[3][w.rank - 1] : 1;
  outer.run({0, 0, 0, 0}, [&](const int64_t (&o)[4]) {
    float* yo = y + o[3];
    if (sy != 1) {
      for (int64_t i = 0; i < n; ++i)
        yo[i * sy] = fn(a[o[0] + i * sa], g.arity >= 2 ? b[o[1] + i * sb] : 0.0f,
                        g.arity >= 3 ? c[o[2] + i * sc] : 0.0f);
      return;
    }
    if (sa == 1 && g.arity == 1) {
      for (int64_t i = 0; i < n; ++i) yo[i] = fn(a[o[0] + i], 0.0f, 0.0f);
      return;
    }
    if (sa == 1 && g.arity == 2 && sb <= 1) {  // both dense, or b one value along the row
      const float* ao = a + o[0];
      const float* bo = b + o[1];
      if (sb == 0) {
        const float bv = *bo;
        for (int64_t i = 0; i < n; ++i) yo[i] = fn(ao[i], bv, 0.0f);
      } else {
        for (int64_t i = 0; i < n; ++i) yo[i] = fn(ao[i], bo[i], 0.0f);
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      yo[i] = fn(a[o[0] + i * sa], g.arity >= 2 ? b[o[1] + i * sb] : 0.0f, g.arity >= 3 ? c[o[2] + i * sc] : 0.0f);
  });
}

template <pw::Fn F>
void fwd_loop(const PwGeom& g, const float* const x[3], float* y) {
  if constexpr (F == pw::Fn::Pow)
    if (uniform(g, 1) && x[1][0] == 2.0f) return fwd_rows(g, x, y, SquareFwd{});
  fwd_rows(g, x, y, FwdFn<F>{g.p, g.q});
}

// Streams of the backward walks: operands a, b, c, the output y, dy (the
// output's layout) and dx (operand k's own, contiguous).
enum { kSa, kSb, kSc, kSy, kSdy, kSdx, kStreams };

template <class Bwd>
void bwd_rows(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
              bool accumulate, Bwd fn) {
  int64_t os[kR], ks[kR];
  out_strides(g, os);
  own_strides(g, k, ks);
  const float* src[4] = {x[0], x[1], x[2], y};
  bool zero[4];
  for (int s = 0; s < 4; ++s) {
    zero[s] = src[s] == nullptr;
    if (zero[s]) src[s] = &kZero;
  }
  // Outer: operand k's own elements (dimensions it does not broadcast);
  // inner: the output positions each of them sums.
  Walk<kStreams> outer;
  Walk<kStreams> inner;
  for (int d = 0; d < g.rank; ++d) {
    const int64_t st[kStreams] = {zero[0] ? 0 : g.stride[0][d], zero[1] ? 0 : g.stride[1][d],
                                  zero[2] ? 0 : g.stride[2][d], zero[3] ? 0 : os[d], os[d], ks[d]};
    const bool reduced = g.dims[k][d] == 1 && g.shape[d] != 1;
    if (reduced) {
      int64_t in[kStreams];
      for (int s = 0; s < kStreams; ++s) in[s] = st[s];
      in[kSdx] = 0;
      inner.add_dim(g.shape[d], in);
    } else {
      outer.add_dim(g.shape[d], st);
    }
  }
  const float* a = src[0];
  const float* b = src[1];
  const float* c = src[2];
  const float* yy = src[3];
  // Each walk's innermost dimension as a plain loop, in the same order.
  Walk<kStreams>& last = inner.rank ? inner : outer;
  Walk<kStreams> rest;
  for (int d = 0; d + 1 < last.rank; ++d) {
    int64_t st[kStreams];
    for (int s = 0; s < kStreams; ++s) st[s] = last.st[s][d];
    rest.add_dim(last.n[d], st);
  }
  const int64_t n = last.rank ? last.n[last.rank - 1] : 1;
  int64_t sl[kStreams] = {};
  for (int s = 0; s < kStreams; ++s) sl[s] = last.rank ? last.st[s][last.rank - 1] : 0;
  const int64_t sa = sl[kSa], sb = sl[kSb], sc = sl[kSc], sy = sl[kSy], sg = sl[kSdy];
  if (inner.rank == 0) {
    const int64_t sk = last.rank ? sl[kSdx] : 1;
    rest.run({0, 0, 0, 0, 0, 0}, [&](const int64_t (&o)[kStreams]) {
      const float* ao = a + o[kSa];
      const float* bo = b + o[kSb];
      const float* co = c + o[kSc];
      const float* yo = yy + o[kSy];
      const float* go = dy + o[kSdy];
      float* xo = dx + o[kSdx];
      if (accumulate) {
        for (int64_t i = 0; i < n; ++i)
          xo[i * sk] = xo[i * sk] + fn(ao[i * sa], bo[i * sb], co[i * sc], yo[i * sy], go[i * sg]);
      } else {
        for (int64_t i = 0; i < n; ++i)
          xo[i * sk] = fn(ao[i * sa], bo[i * sb], co[i * sc], yo[i * sy], go[i * sg]);
      }
    });
    return;
  }
  outer.run({0, 0, 0, 0, 0, 0}, [&](const int64_t (&o)[kStreams]) {
    double sum = 0.0;
    rest.run(o, [&](const int64_t (&i)[kStreams]) {
      const float* ao = a + i[kSa];
      const float* bo = b + i[kSb];
      const float* co = c + i[kSc];
      const float* yo = yy + i[kSy];
      const float* go = dy + i[kSdy];
      for (int64_t j = 0; j < n; ++j) sum += fn(ao[j * sa], bo[j * sb], co[j * sc], yo[j * sy], go[j * sg]);
    });
    const auto v = static_cast<float>(sum);
    dx[o[kSdx]] = accumulate ? dx[o[kSdx]] + v : v;
  });
}

template <pw::Fn F, int K>
void bwd_loop(const PwGeom& g, const float* const x[3], const float* y, const float* dy, float* dx, bool accumulate) {
  if constexpr (F == pw::Fn::Pow && K == 0)
    if (x[1] && uniform(g, 1) && x[1][0] == 2.0f) return bwd_rows(g, K, x, y, dy, dx, accumulate, SquareBwd{});
  bwd_rows(g, K, x, y, dy, dx, accumulate, BwdFn<F, K>{g.p, g.q});
}

template <class F>
void dispatch(pw::Fn fn, F&& f) {
  switch (fn) {
#define REMAT_PW_CASE(Name, name, arity, r0, r1, r2, ff, bf, fwd, g0, g1, g2) \
  case pw::Fn::Name: f(std::integral_constant<pw::Fn, pw::Fn::Name>{}); return;
    REMAT_POINTWISE_FNS(REMAT_PW_CASE)
#undef REMAT_PW_CASE
  }
  throw std::invalid_argument("pointwise: unknown function");
}

}  // namespace

int64_t PwGeom::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

void pointwise_fwd(const PwGeom& g, const float* const x[3], float* y) {
  check_geom(g, "pointwise_fwd");
  dispatch(g.fn, [&](auto f) { fwd_loop<decltype(f)::value>(g, x, y); });
}

void pointwise_bwd(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
                   bool accumulate) {
  check_geom(g, "pointwise_bwd");
  if (k < 0 || k >= g.arity) throw std::invalid_argument("pointwise_bwd: operand " + std::to_string(k));
  dispatch(g.fn, [&](auto f) {
    constexpr pw::Fn F = decltype(f)::value;
    if (k == 0) return bwd_loop<F, 0>(g, x, y, dy, dx, accumulate);
    if constexpr (pw::kFns[static_cast<int>(F)].arity >= 2)
      if (k == 1) return bwd_loop<F, 1>(g, x, y, dy, dx, accumulate);
    if constexpr (pw::kFns[static_cast<int>(F)].arity >= 3)
      if (k == 2) return bwd_loop<F, 2>(g, x, y, dy, dx, accumulate);
  });
}

// ---- reductions ---------------------------------------------------------------

namespace {

void check_reduce(const ReduceGeom& g, const char* fn) {
  if (g.rank < 0 || g.rank > kR) throw std::invalid_argument(std::string(fn) + ": rank " + std::to_string(g.rank) + " is over 8");
  if (static_cast<int>(g.fn) > static_cast<int>(pw::ReduceFn::Amax))
    throw std::invalid_argument(std::string(fn) + ": unknown reduction");
}

// Outer: the output's elements (contiguous, kept dimensions); inner: the input
// positions each reduces. Streams: x (its strides), the output, dx (contiguous in x's shape).
void reduce_walks(const ReduceGeom& g, Walk<3>& outer, Walk<2>& inner) {
  int64_t ys[kR], xs[kR];
  int64_t at_y = 1, at_x = 1;
  for (int d = g.rank; d-- > 0;) {
    ys[d] = g.reduced[d] ? 0 : at_y;
    if (!g.reduced[d]) at_y *= g.shape[d];
    xs[d] = at_x;
    at_x *= g.shape[d];
  }
  for (int d = 0; d < g.rank; ++d) {
    if (g.reduced[d]) inner.add_dim(g.shape[d], {g.stride[d], xs[d]});
    else outer.add_dim(g.shape[d], {g.stride[d], ys[d], xs[d]});
  }
}

}  // namespace

int64_t ReduceGeom::count() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    if (reduced[d]) n *= shape[d];
  return n;
}

void reduce_fwd(const ReduceGeom& g, const float* x, float* y) {
  check_reduce(g, "reduce_fwd");
  Walk<3> outer;
  Walk<2> inner;
  reduce_walks(g, outer, inner);
  const double count = static_cast<double>(g.count());
  outer.run({0, 0, 0}, [&](const int64_t (&o)[3]) {
    if (g.fn == pw::ReduceFn::Amax) {
      float m = -std::numeric_limits<float>::infinity();
      inner.run({o[0], 0}, [&](const int64_t (&i)[2]) {
        const float v = x[i[0]];
        if (v != v || m != m) m = m != m ? m : v;  // NaN wins, as torch.amax
        else if (v > m) m = v;
      });
      y[o[1]] = m;
      return;
    }
    double sum = 0.0;
    inner.run({o[0], 0}, [&](const int64_t (&i)[2]) { sum += x[i[0]]; });
    y[o[1]] = static_cast<float>(g.fn == pw::ReduceFn::Mean ? sum / count : sum);
  });
}

void reduce_bwd(const ReduceGeom& g, const float* x, const float* y, const float* dy, float* dx, bool accumulate) {
  check_reduce(g, "reduce_bwd");
  Walk<3> outer;
  Walk<2> inner;
  reduce_walks(g, outer, inner);
  outer.run({0, 0, 0}, [&](const int64_t (&o)[3]) {
    const float gy = dy[o[1]];
    if (g.fn != pw::ReduceFn::Amax) {
      // PyTorch's mean backward: dy expanded, divided by the count.
      const float v = g.fn == pw::ReduceFn::Mean ? gy / static_cast<float>(g.count()) : gy;
      inner.run({o[0], o[2]}, [&](const int64_t (&i)[2]) { dx[i[1]] = accumulate ? dx[i[1]] + v : v; });
      return;
    }
    const float m = y[o[1]];
    int64_t ties = 0;
    inner.run({o[0], o[2]}, [&](const int64_t (&i)[2]) { ties += x[i[0]] == m; });
    const float share = gy / static_cast<float>(ties);
    inner.run({o[0], o[2]}, [&](const int64_t (&i)[2]) {
      const float v = x[i[0]] == m ? share : 0.0f;
      dx[i[1]] = accumulate ? dx[i[1]] + v : v;
    });
  });
}

}  // namespace remat::cpu
