// The pointwise family and the reductions on the device: the CPU's loops
// (core/kernels/pointwise.cpp) on the coalesced geometry (pointwise_geom.cpp)
// with one thread per output element (forward) or per element of the operand
// whose gradient is formed (backward; a warp or a column of threads where an
// element sums many terms: in double, in a fixed order, no atomics, the same
// bits every run). The functions are pointwise_fns.h's, compiled for the
// device.
#include "gpu/kernels/lowp_io.cuh"

namespace remat::cuda {
namespace {

constexpr int kR = remat::cpu::PwGeom::kMaxRank;

// The geometry as the kernels read it (by value: a kernel argument), in the
// index type I: 32-bit where every offset fits (a 64-bit division is a
// software routine several times a 32-bit one's cost, and the index math is
// most of a pointwise kernel's work), else 64-bit.
template <class I>
struct Geom {
  int rank;
  I shape[kR];
  int arity;
  I stride[3][kR];
  I dims[3][kR];
  I out_stride[kR];  // the forward's (row-major unless out_strided)
  pw::Fn fn;
  float p, q;
};

template <class I>
Geom<I> device_geom(const PwGeom& g) {
  Geom<I> d{};
  d.rank = g.rank;
  d.arity = g.arity;
  d.fn = g.fn;
  d.p = g.p;
  d.q = g.q;
  int64_t at = 1;
  for (int i = g.rank; i-- > 0;) {
    d.shape[i] = static_cast<I>(g.shape[i]);
    d.out_stride[i] = static_cast<I>(g.out_strided ? g.out_stride[i] : at);
    at *= g.shape[i];
    for (int k = 0; k < 3; ++k)
      d.stride[k][i] = static_cast<I>(g.stride[k][i]), d.dims[k][i] = static_cast<I>(g.dims[k][i]);
  }
  return d;
}

// Whether every index and offset of g (and a grid stride past the end) fits in 32 bits.
bool fits_32(const PwGeom& g) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  int64_t span[4] = {1, 1, 1, 1};
  for (int d = 0; d < g.rank; ++d) {
    for (int k = 0; k < 3; ++k) span[k] += (g.shape[d] - 1) * (g.stride[k][d] < 0 ? -g.stride[k][d] : g.stride[k][d]);
    span[3] += (g.shape[d] - 1) * (g.out_strided ? g.out_stride[d] : 1);
  }
  return g.numel() < kLimit && span[0] < kLimit && span[1] < kLimit && span[2] < kLimit && span[3] < kLimit;
}

// Operands are read with detail::ld and results stored with detail::st: on
// f32 pointers the f32 kernel's loads and stores, on DIn/DOut (the 16-bit
// variants, pointwise_fwd_io/bwd_io) the stored dtype's, rounded as the
// widening call rounds (lowp_io.cuh): one source, the same expressions.
using detail::DIn;
using detail::DOut;
__device__ __forceinline__ bool absent(const float* p) { return p == nullptr; }
__device__ __forceinline__ bool absent(DIn a) { return a.p == nullptr; }
template <class In>
__device__ __forceinline__ float read_or_zero(In p, int64_t off) {
  return absent(p) ? 0.0f : detail::ld(p, off);
}

template <class I, class In, class Out>
__global__ void pointwise_fwd_kernel(Geom<I> g, In a, In b, In c, Out y, I n) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    I rest = i, oa = 0, ob = 0, oc = 0, oy = 0;
    for (int d = g.rank; d-- > 0;) {
      const I idx = d == 0 ? rest : rest % g.shape[d];  // the outermost index needs no division
      rest /= d == 0 ? I{1} : g.shape[d];
      oa += idx * g.stride[0][d];
      ob += idx * g.stride[1][d];
      oc += idx * g.stride[2][d];
      oy += idx * g.out_stride[d];
    }
    // Operand 0 may be absent (reads 0): a 16-bit view gradient's 0 + G, as
    // the widening call's zeroed f32 scratch adds it (cuda_ops.cpp's bwd_view_io).
    detail::st(y, oy,
               pw::forward<float>(g.fn, read_or_zero(a, oa), g.arity > 1 ? detail::ld(b, ob) : 0.0f,
                                  g.arity > 2 ? detail::ld(c, oc) : 0.0f, g.p, g.q),
               false);
  }
}

// The backward's pieces: operand k's element j (row-major over its own dims)
// as indices, and the derivative's term at the output position where the
// dimensions k broadcasts over take their row-major index r.
template <class I>
__device__ __forceinline__ void own_index(const Geom<I>& g, int k, I j, I (&idx)[kR]) {
  for (int d = g.rank; d-- > 0;) {
    idx[d] = d == 0 ? j : j % g.dims[k][d];
    j = d == 0 ? j : j / g.dims[k][d];
  }
}
template <class I, class In>
__device__ __forceinline__ float term(const Geom<I>& g, int k, const I (&idx)[kR], I r, In a, In b, In c, In y,
                                      In dy) {
  I oa = 0, ob = 0, oc = 0, oy = 0, at = 1;
  for (int d = g.rank; d-- > 0;) {
    I i = idx[d];
    if (g.dims[k][d] == 1 && g.shape[d] != 1) {
      i = r % g.shape[d];
      r /= g.shape[d];
    }
    oa += i * g.stride[0][d];
    ob += i * g.stride[1][d];
    oc += i * g.stride[2][d];
    oy += i * at;
    at *= g.shape[d];
  }
  return pw::backward<float>(g.fn, k, read_or_zero(a, oa), read_or_zero(b, ob), read_or_zero(c, oc),
                             read_or_zero(y, oy), detail::ld(dy, oy), g.p, g.q);
}

// Operand k's gradient, three ways by its shape; each sums an element's terms
// in double in one fixed order, so every run and every strategy gives the
// same bits (the CPU adds them in row-major order: the float results agree
// but for a rounding tie of the double sum).
// Few terms an element (an operand the size of the output, or a small
// broadcast): one thread an element, its terms in row-major order.
template <class I, class In, class Out>
__global__ void pointwise_bwd_kernel(Geom<I> g, int k, In a, In b, In c, In y, In dy, Out dx, I n, I inner,
                                     bool accumulate) {
  for (I j = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; j < n; j += static_cast<I>(gridDim.x) * blockDim.x) {
    I idx[kR];
    own_index(g, k, j, idx);
    if (inner == 1) {
      detail::st(dx, j, term(g, k, idx, I{0}, a, b, c, y, dy), accumulate);
      continue;
    }
    double sum = 0.0;
    for (I r = 0; r < inner; ++r) sum += term(g, k, idx, r, a, b, c, y, dy);
    detail::st(dx, j, static_cast<float>(sum), accumulate);
  }
}

// Many terms, the broadcast dimensions innermost (a norm's statistics, (B, T,
// 1) over (B, T, D)): a warp an element, lane l adding terms l, l + 32, ...
// (neighbouring lanes read neighbouring addresses), then the butterfly.
template <class I, class In, class Out>
__global__ void pointwise_bwd_warp_kernel(Geom<I> g, int k, In a, In b, In c, In y, In dy, Out dx, I n, I inner,
                                          bool accumulate) {
  const I lane = threadIdx.x % 32, warps = static_cast<I>(gridDim.x) * (blockDim.x / 32);
  for (I j = blockIdx.x * static_cast<I>(blockDim.x / 32) + threadIdx.x / 32; j < n; j += warps) {  // j is the warp's: uniform
    I idx[kR];
    own_index(g, k, j, idx);
    double sum = 0.0;
    for (I r = lane; r < inner; r += 32) sum += term(g, k, idx, r, a, b, c, y, dy);
    sum = detail::warp_sum(sum);
    if (lane == 0) detail::st(dx, j, static_cast<float>(sum), accumulate);
  }
}

// Many terms, the operand's own dimensions innermost (a weight, (D) over (B,
// T, D)): 32 elements a block side by side, the block's kRows rows of threads
// splitting each element's terms (row q adds terms q, q + kRows, ...), the
// rows' sums added in row order.
constexpr int kRows = 16;
template <class I, class In, class Out>
__global__ void __launch_bounds__(32 * kRows) pointwise_bwd_cols_kernel(Geom<I> g, int k, In a, In b, In c, In y,
                                                                       In dy, Out dx, I n, I inner, bool accumulate) {
  __shared__ double part[kRows][33];
  const I col = threadIdx.x % 32, row = threadIdx.x / 32;
  for (I base = blockIdx.x * I{32}; base < n; base += static_cast<I>(gridDim.x) * 32) {  // uniform over the block
    const I j = base + col;
    double sum = 0.0;
    if (j < n) {
      I idx[kR];
      own_index(g, k, j, idx);
      for (I r = row; r < inner; r += kRows) sum += term(g, k, idx, r, a, b, c, y, dy);
    }
    part[row][col] = sum;
    __syncthreads();
    if (row == 0 && j < n) {
      double total = 0.0;
      for (int q = 0; q < kRows; ++q) total += part[q][col];
      detail::st(dx, j, static_cast<float>(total), accumulate);
    }
    __syncthreads();
  }
}

// Reductions: one thread per output element, the reduced positions in row-major order.
__global__ void reduce_fwd_kernel(remat::cpu::ReduceGeom g, const float* x, float* y, int64_t n, int64_t inner) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    double sum = 0.0;
    float m = -INFINITY;
    for (int64_t r = 0; r < inner; ++r) {
      int64_t kept = j, red = r, off = 0;
      for (int d = g.rank; d-- > 0;) {
        int64_t i;
        if (g.reduced[d]) i = red % g.shape[d], red /= g.shape[d];
        else i = kept % g.shape[d], kept /= g.shape[d];
        off += i * g.stride[d];
      }
      const float v = x[off];
      if (g.fn == pw::ReduceFn::Amax) {
        if (v != v || m != m) m = m != m ? m : v;
        else if (v > m) m = v;
      } else {
        sum += v;
      }
    }
    y[j] = g.fn == pw::ReduceFn::Amax ? m
           : g.fn == pw::ReduceFn::Mean ? static_cast<float>(sum / static_cast<double>(inner))
                                        : static_cast<float>(sum);
  }
}

// dx: one thread per output element, writing the elements it reduced (each
// element of x belongs to one output): PyTorch's formulas, as on the CPU.
__global__ void reduce_bwd_kernel(remat::cpu::ReduceGeom g, const float* x, const float* y, const float* dy,
                                  float* dx, int64_t n, int64_t inner, bool accumulate) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    const float gy = dy[j];
    const bool amax = g.fn == pw::ReduceFn::Amax;
    int64_t ties = 0;
    for (int pass = amax ? 0 : 1; pass < 2; ++pass) {
      const float share = amax ? gy / static_cast<float>(ties)
                          : g.fn == pw::ReduceFn::Mean ? gy / static_cast<float>(inner) : gy;
      for (int64_t r = 0; r < inner; ++r) {
        int64_t kept = j, red = r, off = 0, dense = 0, at = 1;
        for (int d = g.rank; d-- > 0;) {
          int64_t i;
          if (g.reduced[d]) i = red % g.shape[d], red /= g.shape[d];
          else i = kept % g.shape[d], kept /= g.shape[d];
          off += i * g.stride[d];
          dense += i * at;
          at *= g.shape[d];
        }
        if (pass == 0) {
          ties += x[off] == y[j];
        } else {
          const float v = amax ? (x[off] == y[j] ? share : 0.0f) : share;
          detail::store_grad(&dx[dense], v, accumulate);
        }
      }
    }
  }
}

void check(const PwGeom& g, const char* fn) {
  if (g.rank < 0 || g.rank > kR) throw std::invalid_argument(std::string(fn) + ": rank over 8");
  if (g.arity < 1 || g.arity > 3) throw std::invalid_argument(std::string(fn) + ": arity " + std::to_string(g.arity));
  if (static_cast<int>(g.fn) >= pw::kFnCount) throw std::invalid_argument(std::string(fn) + ": unknown function");
}

}  // namespace

namespace {

template <class In, class Out>
void launch_fwd(const PwGeom& geom, const In x[3], Out y, cudaStream_t stream) {
  check(geom, "pointwise_fwd");
  const PwGeom g = coalesced(geom);
  const int64_t n = g.numel();
  if (n == 0) return;
  if (fits_32(g))
    pointwise_fwd_kernel<int32_t, In, Out><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(
        device_geom<int32_t>(g), x[0], x[1], x[2], y, static_cast<int32_t>(n));
  else
    pointwise_fwd_kernel<int64_t, In, Out><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(
        device_geom<int64_t>(g), x[0], x[1], x[2], y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <class I, class In, class Out>
void launch_bwd_as(const PwGeom& g, int k, const In x[3], In y, In dy, Out dx, int64_t n, int64_t inner,
                   bool accumulate, cudaStream_t stream) {
  const Geom<I> d = device_geom<I>(g);
  const I nn = static_cast<I>(n), ni = static_cast<I>(inner);
  constexpr int64_t kManyTerms = 32;
  if (inner < kManyTerms) {
    pointwise_bwd_kernel<I, In, Out><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(d, k, x[0], x[1], x[2], y,
                                                                                        dy, dx, nn, ni, accumulate);
  } else if (g.dims[k][g.rank - 1] == 1) {  // coalesced: the innermost dimension is broadcast, of size > 1
    constexpr int kWarps = detail::kBlock / 32;
    pointwise_bwd_warp_kernel<I, In, Out><<<detail::grid_for(n, kWarps), detail::kBlock, 0, stream>>>(
        d, k, x[0], x[1], x[2], y, dy, dx, nn, ni, accumulate);
  } else {
    pointwise_bwd_cols_kernel<I, In, Out><<<detail::grid_for(n, 32), 32 * kRows, 0, stream>>>(
        d, k, x[0], x[1], x[2], y, dy, dx, nn, ni, accumulate);
  }
}

// `zero` writes dx = 0 where no output element reaches it (a broadcast over a
// dimension of size 0): the f32 call's memset; the 16-bit one stores 0 as the
// widening call would store a zeroed scratch.
template <class In, class Out, class Zero>
void launch_bwd(const PwGeom& geom, int k, const In x[3], In y, In dy, Out dx, bool accumulate, Zero zero,
                cudaStream_t stream) {
  check(geom, "pointwise_bwd");
  if (k < 0 || k >= geom.arity) throw std::invalid_argument("pointwise_bwd: operand " + std::to_string(k));
  const PwGeom g = coalesced(geom);
  int64_t n = 1, inner = 1;
  for (int d = 0; d < g.rank; ++d) {
    n *= g.dims[k][d];
    if (g.dims[k][d] == 1 && g.shape[d] != 1) inner *= g.shape[d];
  }
  if (n == 0) return;
  if (inner == 0) return zero(n);
  if (fits_32(g)) launch_bwd_as<int32_t>(g, k, x, y, dy, dx, n, inner, accumulate, stream);
  else launch_bwd_as<int64_t>(g, k, x, y, dy, dx, n, inner, accumulate, stream);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace

void pointwise_fwd(const PwGeom& g, const float* const x[3], float* y, cudaStream_t stream) {
  launch_fwd<const float*, float*>(g, x, y, stream);
}

void pointwise_bwd(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
                   bool accumulate, cudaStream_t stream) {
  launch_bwd<const float*, float*>(g, k, x, y, dy, dx, accumulate, [&](int64_t n) {
    if (!accumulate) CUDA_CHECK_THROW(cudaMemsetAsync(dx, 0, 4 * static_cast<std::size_t>(n), stream));
  }, stream);
}

void pointwise_fwd_io(const PwGeom& g, const IoIn x[3], IoOut y, cudaStream_t stream) {
  const DIn in[3] = {detail::din(x[0]), detail::din(x[1]), detail::din(x[2])};
  launch_fwd<DIn, DOut>(g, in, detail::dout(y), stream);
}

void pointwise_bwd_io(const PwGeom& g, int k, const IoIn x[3], IoIn y, IoIn dy, IoOut dx, cudaStream_t stream) {
  const DIn in[3] = {detail::din(x[0]), detail::din(x[1]), detail::din(x[2])};
  launch_bwd<DIn, DOut>(g, k, in, detail::din(y), detail::din(dy), detail::dout(dx), false, [](int64_t) {
    // lowp_io (core/exec/pointwise_path.cpp) gives no empty op this path.
    throw std::invalid_argument("pointwise_bwd_io: an operand broadcast over an empty dimension");
  }, stream);
}

void reduce_fwd(const ReduceGeom& g, const float* x, float* y, cudaStream_t stream) {
  if (g.rank < 0 || g.rank > kR) throw std::invalid_argument("reduce_fwd: rank over 8");
  const int64_t inner = g.count();
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) n *= g.reduced[d] ? 1 : g.shape[d];
  if (n == 0 || inner == 0) return;
  reduce_fwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(g, x, y, n, inner);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void reduce_bwd(const ReduceGeom& g, const float* x, const float* y, const float* dy, float* dx, bool accumulate,
                cudaStream_t stream) {
  if (g.rank < 0 || g.rank > kR) throw std::invalid_argument("reduce_bwd: rank over 8");
  const int64_t inner = g.count();
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) n *= g.reduced[d] ? 1 : g.shape[d];
  if (n == 0 || inner == 0) return;
  reduce_bwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(g, x, y, dy, dx, n, inner, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
