// torch.topk's indices and torch.gather on the device (cpu_kernels.h's
// topk_fwd, gather_fwd, gather_bwd; core/kernels/select.cpp): one thread per
// line of the top-k (k selection passes over the line, each taking the best
// position ranked below the one before: the CPU's order), one per output
// element of the gather, and one per element of x for its gradient, which
// sums the picks along the axis in increasing order in double (no atomics:
// the same bits every run, and the CPU's).
#include <stdexcept>
#include <string>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

constexpr int kR = remat::cpu::GatherGeom::kMaxRank;

// a ranks above b: the larger value, NaN above every number, a tie to the lower position.
__device__ bool ranks_above(float a, int64_t ia, float b, int64_t ib) {
  const bool na = isnan(a), nb = isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

__global__ void topk_kernel(TopKGeom g, const float* __restrict__ x, int64_t* __restrict__ index, int64_t lines) {
  const int64_t line = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (line >= lines) return;
  // The line's start: its coordinates outside the axis, row-major.
  int64_t rest = line, at = 0;
  for (int d = g.rank; d-- > 0;) {
    if (d == g.axis) continue;
    at += (rest % g.shape[d]) * g.stride[d];
    rest /= g.shape[d];
  }
  int64_t inner = 1;
  for (int d = g.axis + 1; d < g.rank; ++d) inner *= g.shape[d];
  const int64_t o = line / inner, q = line % inner, n = g.shape[g.axis], step = g.stride[g.axis];
  float prev = 0;
  int64_t prev_i = -1;
  for (int64_t j = 0; j < g.k; ++j) {
    int64_t best = -1;
    float bv = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[at + i * step];
      if (prev_i >= 0 && !ranks_above(prev, prev_i, v, i)) continue;  // taken already
      if (best < 0 || ranks_above(v, i, bv, best)) best = i, bv = v;
    }
    index[(o * g.k + j) * inner + q] = best;
    prev = bv;
    prev_i = best;
  }
}

__global__ void gather_fwd_kernel(GatherGeom g, const float* __restrict__ x, const int64_t* __restrict__ index,
                                  float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  int64_t c[kR];
  int64_t rest = i, ii = 0;
  for (int d = g.rank; d-- > 0;) {
    c[d] = rest % g.shape[d];
    rest /= g.shape[d];
    ii += c[d] * g.i_stride[d];
  }
  const int64_t pick = index[ii];
  int64_t xi = 0;
  for (int d = 0; d < g.rank; ++d) xi += (d == g.axis ? pick : c[d]) * g.x_stride[d];
  y[i] = x[xi];
}

__global__ void gather_bwd_kernel(GatherGeom g, const int64_t* __restrict__ index, const float* __restrict__ dy,
                                  float* __restrict__ dx, int64_t n, bool accumulate) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  int64_t c[kR], dy_stride[kR];
  int64_t rest = e;
  for (int d = g.rank; d-- > 0;) {
    c[d] = rest % g.x_shape[d];
    rest /= g.x_shape[d];
  }
  for (int64_t d = g.rank, s = 1; d-- > 0;) {
    dy_stride[d] = s;
    s *= g.shape[d];
  }
  double sum = 0;
  bool inside = true;
  for (int d = 0; d < g.rank; ++d)
    if (d != g.axis && c[d] >= g.shape[d]) inside = false;
  if (inside) {
    int64_t ii = 0, yi = 0;
    for (int d = 0; d < g.rank; ++d)
      if (d != g.axis) {
        ii += c[d] * g.i_stride[d];
        yi += c[d] * dy_stride[d];
      }
    for (int64_t j = 0; j < g.shape[g.axis]; ++j)
      if (index[ii + j * g.i_stride[g.axis]] == c[g.axis]) sum += static_cast<double>(dy[yi + j * dy_stride[g.axis]]);
  }
  detail::store_grad(&dx[e], static_cast<float>(sum), accumulate);
}

void check_rank(int rank, const char* fn) {
  if (rank < 1 || rank > kR) throw std::invalid_argument(std::string(fn) + ": rank " + std::to_string(rank));
}

}  // namespace

void topk_fwd(const TopKGeom& g, const float* x, int64_t* index, cudaStream_t stream) {
  check_rank(g.rank, "topk_fwd");
  const int64_t lines = g.lines();
  if (lines == 0) return;
  topk_kernel<<<detail::grid_for(lines), detail::kBlock, 0, stream>>>(g, x, index, lines);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void gather_fwd(const GatherGeom& g, const float* x, const int64_t* index, float* y, cudaStream_t stream) {
  check_rank(g.rank, "gather_fwd");
  const int64_t n = g.numel();
  if (n == 0) return;
  gather_fwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(g, x, index, y, n);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void gather_bwd(const GatherGeom& g, const int64_t* index, const float* dy, float* dx, bool accumulate,
                cudaStream_t stream) {
  check_rank(g.rank, "gather_bwd");
  const int64_t n = g.x_numel();
  if (n == 0) return;
  gather_bwd_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(g, index, dy, dx, n, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
