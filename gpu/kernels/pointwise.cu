// The pointwise family and the reductions on the device: the CPU's loops
// (core/kernels/pointwise.cpp) with one thread per output element (forward)
// or per element of the operand whose gradient is formed (backward: the
// output positions it broadcasts over summed in row-major order, in double,
// as on the CPU: no atomics, the same bits every run). The functions are
// pointwise_fns.h's, compiled for the device.
#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

constexpr int kR = remat::cpu::PwGeom::kMaxRank;

// The geometry as the kernels read it (by value: a kernel argument).
struct Geom {
  int rank;
  int64_t shape[kR];
  int arity;
  int64_t stride[3][kR];
  int64_t dims[3][kR];
  int64_t out_stride[kR];  // the forward's (row-major unless out_strided)
  pw::Fn fn;
  float p, q;
};

Geom device_geom(const PwGeom& g) {
  Geom d{};
  d.rank = g.rank;
  d.arity = g.arity;
  d.fn = g.fn;
  d.p = g.p;
  d.q = g.q;
  int64_t at = 1;
  for (int i = g.rank; i-- > 0;) {
    d.shape[i] = g.shape[i];
    d.out_stride[i] = g.out_strided ? g.out_stride[i] : at;
    at *= g.shape[i];
    for (int k = 0; k < 3; ++k) d.stride[k][i] = g.stride[k][i], d.dims[k][i] = g.dims[k][i];
  }
  return d;
}

__device__ __forceinline__ float read_or_zero(const float* p, int64_t off) { return p ? p[off] : 0.0f; }

__global__ void pointwise_fwd_kernel(Geom g, const float* a, const float* b, const float* c, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i, oa = 0, ob = 0, oc = 0, oy = 0;
    for (int d = g.rank; d-- > 0;) {
      const int64_t idx = rest % g.shape[d];
      rest /= g.shape[d];
      oa += idx * g.stride[0][d];
      ob += idx * g.stride[1][d];
      oc += idx * g.stride[2][d];
      oy += idx * g.out_stride[d];
    }
    y[oy] = pw::forward<float>(g.fn, a[oa], g.arity > 1 ? b[ob] : 0.0f, g.arity > 2 ? c[oc] : 0.0f, g.p, g.q);
  }
}

// One thread per element j of operand k (row-major over its own dims): the
// output positions it reaches, reduced dimensions walked last-fastest.
__global__ void pointwise_bwd_kernel(Geom g, int k, const float* a, const float* b, const float* c, const float* y,
                                     const float* dy, float* dx, int64_t n, int64_t inner, bool accumulate) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    // The kept dimensions' indices from j.
    int64_t idx[kR];
    int64_t rest = j;
    for (int d = g.rank; d-- > 0;) {
      idx[d] = rest % g.dims[k][d];
      rest /= g.dims[k][d];
    }
    double sum = 0.0;
    for (int64_t r = 0; r < inner; ++r) {
      // The reduced dimensions' indices from r (row-major over them).
      int64_t rr = r, oa = 0, ob = 0, oc = 0, oy = 0, at = 1;
      for (int d = g.rank; d-- > 0;) {
        int64_t i = idx[d];
        if (g.dims[k][d] == 1 && g.shape[d] != 1) {
          i = rr % g.shape[d];
          rr /= g.shape[d];
        }
        oa += i * g.stride[0][d];
        ob += i * g.stride[1][d];
        oc += i * g.stride[2][d];
        oy += i * at;
        at *= g.shape[d];
      }
      const float v = pw::backward<float>(g.fn, k, read_or_zero(a, oa), read_or_zero(b, ob), read_or_zero(c, oc),
                                          read_or_zero(y, oy), dy[oy], g.p, g.q);
      if (inner == 1) {
        detail::store_grad(&dx[j], v, accumulate);
        break;
      }
      sum += v;
    }
    if (inner != 1) detail::store_grad(&dx[j], static_cast<float>(sum), accumulate);
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

void pointwise_fwd(const PwGeom& g, const float* const x[3], float* y, cudaStream_t stream) {
  check(g, "pointwise_fwd");
  const int64_t n = g.numel();
  if (n == 0) return;
  pointwise_fwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(device_geom(g), x[0], x[1], x[2], y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void pointwise_bwd(const PwGeom& g, int k, const float* const x[3], const float* y, const float* dy, float* dx,
                   bool accumulate, cudaStream_t stream) {
  check(g, "pointwise_bwd");
  if (k < 0 || k >= g.arity) throw std::invalid_argument("pointwise_bwd: operand " + std::to_string(k));
  int64_t n = 1, inner = 1;
  for (int d = 0; d < g.rank; ++d) {
    n *= g.dims[k][d];
    if (g.dims[k][d] == 1 && g.shape[d] != 1) inner *= g.shape[d];
  }
  if (n == 0) return;
  pointwise_bwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(device_geom(g), k, x[0], x[1], x[2], y, dy,
                                                                           dx, n, inner, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
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
