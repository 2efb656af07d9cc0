// Tensor plumbing: concatenation along an axis (strided copies) and the
// embedding lookup with its gradient, gathered per table row in position order
// so that no atomics decide the summation order (by atomicAdd, in any order,
// only under remat run --nondeterministic-backward).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "gpu/kernels/device_common.cuh"

namespace remat::cuda {
namespace {

using detail::kBlock;

// ---- kernels ------------------------------------------------------------------

// dst (outer, width) with row pitch dst_pitch += src (outer, width) with row pitch src_pitch.
__global__ void add_rows_kernel(const float* src, int64_t src_pitch, float* dst, int64_t dst_pitch,
                                int64_t outer, int64_t width) {
  const int64_t n = outer * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    dst[r * dst_pitch + c] += src[r * src_pitch + c];
  }
}

// Shape and strides of a strided read, passed by value (rank <= kMaxStridedRank).
constexpr int kMaxStridedRank = 8;
struct StridedLayout {
  int rank;
  int64_t shape[kMaxStridedRank];
  int64_t stride[kMaxStridedRank];
};

// Where logical element i (row-major over l.shape) sits in the strided storage.
__device__ inline int64_t strided_offset(int64_t i, const StridedLayout& l) {
  int64_t rest = i, at = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    at += (rest % l.shape[d]) * l.stride[d];
    rest /= l.shape[d];
  }
  return at;
}

// dst (n, contiguous, logical order) = src read through the layout's strides.
__global__ void strided_copy_kernel(const float* src, float* dst, int64_t n, StridedLayout l) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[strided_offset(i, l)];
  }
}

// dst read through the layout's strides += src (n, contiguous): a view's
// gradient back onto its input. The map must be one to one (no stride 0).
__global__ void strided_add_kernel(const float* src, float* dst, int64_t n, StridedLayout l) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[strided_offset(i, l)] += src[i];
  }
}

// An Expand's backward without atomics: thread j owns input element j and
// adds, in increasing view order, every dy element the view maps onto it
// (l: the view's shape, and per dimension its stride in the input, 0 where it
// repeats). Starting from dx[j] (accumulate) or 0 and adding in that order is
// the CPU's loop exactly, so both give the same bits.
__global__ void expand_bwd_kernel(const float* dy, float* dx, int64_t n_in, StridedLayout l, bool accumulate) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n_in;
       j += int64_t{gridDim.x} * blockDim.x) {
    // The view element with j's index along the kept dimensions and 0 along
    // the repeated ones, and the view's row-major strides.
    int64_t first = 0, vstride[kMaxStridedRank], span = 1;
    for (int d = l.rank - 1; d >= 0; --d) {
      vstride[d] = span;
      if (l.stride[d] != 0) first += (j / l.stride[d]) % l.shape[d] * span;
      span *= l.shape[d];
    }
    float acc = accumulate ? dx[j] : 0.0f;
    int64_t idx[kMaxStridedRank] = {};
    int64_t at = first;
    for (;;) {
      acc += dy[at];
      int d = l.rank - 1;  // odometer over the repeated dimensions, the last fastest
      for (; d >= 0; --d) {
        if (l.stride[d] != 0 || l.shape[d] == 1) continue;
        at += vstride[d];
        if (++idx[d] < l.shape[d]) break;
        at -= vstride[d] * l.shape[d];
        idx[d] = 0;
      }
      if (d < 0) break;
    }
    dx[j] = acc;
  }
}

// y (n, dim) = table[idx] (NaN rows for an index out of range).
template <typename Index>
__global__ void embedding_fwd_kernel(const float* table, const Index* idx, float* y, int64_t n,
                                     int64_t dim, int64_t vocab) {
  const int64_t total = n * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx[i / dim];
    y[i] = row >= 0 && row < vocab ? table[row * dim + i % dim] : nanf("");
  }
}

// One block per position i (grid-stride) whose token v = idx[i] has no earlier
// position: that block adds to dtable[v] every dy row of a position j >= i with
// idx[j] == v, in increasing j, as the CPU's loop does; so no two blocks write
// one row and no atomics decide the order. Work: n²/2 index reads for the
// first-position tests, plus a ballot per blockDim positions after each distinct
// token's first; no longer the whole vocabulary (a GPT's 50257 rows) times every
// position, which took 90 ms of GPT-2 small's 232 ms step on an H100. Positions
// whose token is out of range are left out.
template <typename Index>
__global__ void embedding_bwd_kernel(const float* dy, const Index* idx, float* dtable, int64_t n,
                                     int64_t dim, int64_t vocab) {
  __shared__ unsigned matches[kBlock / 32];  // one ballot per warp: which of blockDim positions are v's
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const Index v = idx[i];
    if (v < 0 || v >= vocab) continue;  // the same for every thread of the block
    int earlier = 0;
    for (int64_t j = threadIdx.x; j < i; j += blockDim.x) earlier |= idx[j] == v;
    if (__syncthreads_or(earlier)) continue;
    for (int64_t d0 = 0; d0 < dim; d0 += blockDim.x) {
      const int64_t d = d0 + threadIdx.x;
      float acc = d < dim ? dtable[v * dim + d] : 0.0f;
      for (int64_t base = i; base < n; base += blockDim.x) {
        const int64_t j = base + threadIdx.x;
        const unsigned ballot = __ballot_sync(0xffffffffu, j < n && idx[j] == v);
        if (lane == 0) matches[warp] = ballot;
        __syncthreads();
        for (int w = 0; w < warps; ++w)
          for (unsigned m = matches[w]; m != 0; m &= m - 1) {
            const int64_t k = base + w * 32 + (__ffs(static_cast<int>(m)) - 1);
            if (d < dim) acc = __fadd_rn(acc, dy[k * dim + d]);
          }
        __syncthreads();  // matches[] is rewritten by the next chunk
      }
      if (d < dim) dtable[v * dim + d] = acc;
    }
  }
}

// remat run --nondeterministic-backward: each element of dy added to its
// table row by atomicAdd, one thread an element, so that a row's positions
// are summed in whatever order the threads land: n·dim additions and nothing
// else, where the ordered kernel above first tests every earlier position of
// each one (n²/2 index reads) and then walks the positions after each
// distinct token's first in chunks. Positions whose token is out of range are
// left out, as above.
template <typename Index>
__global__ void embedding_bwd_atomic_kernel(const float* dy, const Index* idx, float* dtable, int64_t n,
                                            int64_t dim, int64_t vocab) {
  const int64_t total = n * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Index v = idx[i / dim];
    if (v >= 0 && v < vocab) atomicAdd(&dtable[v * dim + i % dim], dy[i]);
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------

void concat_fwd(const float* const* xs, const int64_t* widths, int64_t count, float* y, int64_t outer,
                int64_t inner, cudaStream_t stream) {
  detail::check_sizes("concat_fwd", {count, outer, inner});
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) {
    detail::check_sizes("concat_fwd", {widths[i]});
    total += widths[i];
  }
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    const size_t row = sizeof(float) * widths[i] * inner;
    if (row && outer)
      CUDA_CHECK_THROW(cudaMemcpy2DAsync(y + at * inner, sizeof(float) * total * inner, xs[i], row, row,
                                         outer, cudaMemcpyDeviceToDevice, stream));
    at += widths[i];
  }
}

void concat_bwd(const float* dy, float* const* dxs, const int64_t* widths, int64_t count, int64_t outer,
                int64_t inner, const uint8_t* accumulate, cudaStream_t stream) {
  detail::check_sizes("concat_bwd", {count, outer, inner});
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) total += widths[i];
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t width = widths[i] * inner;
    if (dxs[i] && width && outer) {
      const float* src = dy + at * inner;
      if (accumulate && accumulate[i]) {
        add_rows_kernel<<<detail::grid_for(outer * width), kBlock, 0, stream>>>(src, total * inner, dxs[i],
                                                                                width, outer, width);
        CUDA_CHECK_THROW(cudaGetLastError());
      } else {
        CUDA_CHECK_THROW(cudaMemcpy2DAsync(dxs[i], sizeof(float) * width, src, sizeof(float) * total * inner,
                                           sizeof(float) * width, outer, cudaMemcpyDeviceToDevice, stream));
      }
    }
    at += widths[i];
  }
}

namespace {

StridedLayout layout(const char* fn, const int64_t* shape, const int64_t* stride, int rank, int64_t& n) {
  if (rank < 0 || rank > kMaxStridedRank)
    throw std::invalid_argument(std::string(fn) + ": rank " + std::to_string(rank) + " is over " +
                                std::to_string(kMaxStridedRank));
  StridedLayout l{};
  l.rank = rank;
  n = 1;
  for (int d = 0; d < rank; ++d) {
    l.shape[d] = shape[d];
    l.stride[d] = stride[d];
    n *= shape[d];
  }
  detail::check_sizes(fn, {n});
  return l;
}

}  // namespace

void strided_copy(const float* src, float* dst, const int64_t* shape, const int64_t* stride, int rank,
                  cudaStream_t stream) {
  int64_t n = 0;
  const StridedLayout l = layout("strided_copy", shape, stride, rank, n);
  if (n == 0) return;
  strided_copy_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(src, dst, n, l);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void strided_add(const float* src, float* dst, const int64_t* shape, const int64_t* stride, int rank,
                 cudaStream_t stream) {
  int64_t n = 0;
  const StridedLayout l = layout("strided_add", shape, stride, rank, n);
  for (int d = 0; d < rank; ++d)
    if (stride[d] == 0 && shape[d] > 1)
      throw std::invalid_argument("strided_add: stride 0 sends several elements to one (an expand)");
  if (n == 0) return;
  strided_add_kernel<<<detail::grid_for(n), kBlock, 0, stream>>>(src, dst, n, l);
  CUDA_CHECK_THROW(cudaGetLastError());
}

void expand_bwd(const float* dy, float* dx, const int64_t* shape, const int64_t* stride, int rank, int64_t n_in,
                bool accumulate, cudaStream_t stream) {
  int64_t n = 0;
  const StridedLayout l = layout("expand_bwd", shape, stride, rank, n);
  detail::check_sizes("expand_bwd", {n_in});
  if (n_in == 0) return;
  expand_bwd_kernel<<<detail::grid_for(n_in), kBlock, 0, stream>>>(dy, dx, n_in, l, accumulate);
  CUDA_CHECK_THROW(cudaGetLastError());
}

namespace {

template <typename Index>
void gather_rows(const float* table, const Index* idx, float* y, int64_t n, int64_t dim, int64_t vocab,
                 cudaStream_t stream) {
  detail::check_sizes("embedding_fwd", {n, dim, vocab});
  if (n == 0 || dim == 0) return;
  embedding_fwd_kernel<<<detail::grid_for(n * dim), kBlock, 0, stream>>>(table, idx, y, n, dim, vocab);
  CUDA_CHECK_THROW(cudaGetLastError());
}

template <typename Index>
void scatter_rows(const float* dy, const Index* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab,
                  bool any_order, cudaStream_t stream) {
  detail::check_sizes("embedding_bwd", {n, dim, vocab});
  if (n == 0 || dim == 0 || vocab == 0) return;
  if (any_order) {
    embedding_bwd_atomic_kernel<<<detail::grid_for(n * dim), kBlock, 0, stream>>>(dy, idx, dtable, n, dim, vocab);
    CUDA_CHECK_THROW(cudaGetLastError());
    return;
  }
  // Whole warps (the ballots need all 32 lanes), at most kBlock threads.
  const int block = dim < kBlock ? static_cast<int>((dim + 31) / 32 * 32) : kBlock;
  const unsigned grid = static_cast<unsigned>(n < detail::kMaxBlocks ? n : detail::kMaxBlocks);
  embedding_bwd_kernel<<<grid, block, 0, stream>>>(dy, idx, dtable, n, dim, vocab);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace

void embedding_fwd(const float* table, const int32_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab,
                   cudaStream_t stream) {
  gather_rows(table, idx, y, n, dim, vocab, stream);
}
void embedding_fwd(const float* table, const int64_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab,
                   cudaStream_t stream) {
  gather_rows(table, idx, y, n, dim, vocab, stream);
}
void embedding_bwd(const float* dy, const int32_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab,
                   cudaStream_t stream, bool any_order) {
  scatter_rows(dy, idx, dtable, n, dim, vocab, any_order, stream);
}
void embedding_bwd(const float* dy, const int64_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab,
                   cudaStream_t stream, bool any_order) {
  scatter_rows(dy, idx, dtable, n, dim, vocab, any_order, stream);
}

}  // namespace remat::cuda
