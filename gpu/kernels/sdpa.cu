// Fused scaled dot-product attention (cpu_kernels.h: SdpaGeom), the mirror of
// core/kernels/sdpa.cpp: out through its strides (columns adjacent), lse, dout
// and the gradients contiguous. One warp owns one row: a query row in the forward and
// in the backward's dq kernel, a key row in the backward's dk/dv kernel; a block
// is kWarps such rows of one head, and walks the other side's rows in tiles of
// 32 staged in shared memory, one row per lane. Every sum has one fixed order:
// a lane's dot product runs over the columns in increasing order, a row's
// weighted sum over the tile's rows in increasing order (each lane's value
// broadcast by a shuffle), tiles in increasing order; the warp reductions are
// the butterflies of device_common.cuh. No atomics, no scratch: reruns give the
// same bits.
// Mixed precision's variant (sdpa_*_io, docs/gpu.md#16-bit-loads-and-stores)
// is the same kernels instantiated on tensors as stored (lowp_io.cuh's ld/st
// on DIn/DOut instead of f32 pointers): q, k, v, out and dout widened
// exactly on load, everything after that the f32 kernels' own code (the
// rows staged in shared memory as f32), out and the gradients rounded once
// on store as the widening call rounds them; lse f32 either way.
#include <cmath>
#include <string>

#include "gpu/kernels/lowp_io.cuh"

namespace remat::cuda {
namespace {

constexpr int kWarps = 8;             // rows per block, one warp each
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 32;             // rows of the other side per shared tile: one per lane
constexpr int kPerLane = 8;           // head-dimension columns per lane
constexpr int64_t kMaxHeadDim = 32 * kPerLane;  // 256
constexpr unsigned kFull = 0xffffffffu;

using detail::DIn;
using detail::DOut;
using detail::ld;
using detail::st;
// Whether a gradient is wanted: a non-null f32 pointer, or a DOut with one.
__host__ __device__ __forceinline__ bool wanted(const float* p) { return p != nullptr; }
__host__ __device__ __forceinline__ bool wanted(DOut o) { return o.p != nullptr; }

struct Geom {  // SdpaGeom for the device
  int64_t heads, tq, tk, d, dv;
  bool causal;
  float scale;
  int64_t qs[4], ks[4], vs[4], os[4];  // os: out's; its columns are adjacent (os[3] = 1)
  const float* mask;                   // the additive mask (SdpaGeom's), or null
  int64_t ms[4];
};

Geom device_geom(const cpu::SdpaGeom& g) {
  Geom r{g.heads, g.tq, g.tk, g.d, g.dv, g.causal, g.scale, {}, {}, {}, {}, g.mask, {}};
  for (int i = 0; i < 4; ++i) {
    r.ms[i] = g.mask_strides[i];
    r.qs[i] = g.q_strides[i];
    r.ks[i] = g.k_strides[i];
    r.vs[i] = g.v_strides[i];
    r.os[i] = g.out_strides[i];
  }
  return r;
}

// The CPU's checks, and the head dimensions these kernels hold per lane.
void check(const char* fn, const cpu::SdpaGeom& g) {
  g.check(fn);
  if (g.d > kMaxHeadDim || g.dv > kMaxHeadDim)
    throw std::invalid_argument(std::string(fn) + ": head dimensions (" + std::to_string(g.d) + ", " +
                                std::to_string(g.dv) + ") above the CUDA kernels' limit of " +
                                std::to_string(kMaxHeadDim));
}

// Keys query row i sees: all, or j <= i when causal (top-left).
__device__ __forceinline__ int64_t visible(const Geom& g, int64_t i) {
  return g.causal ? (i + 1 < g.tk ? i + 1 : g.tk) : g.tk;
}

// The additive mask at (query i, key j) of head hd = b·heads + h; 0 without one.
__device__ __forceinline__ float mask_at(const Geom& g, int64_t hd, int64_t i, int64_t j) {
  if (!g.mask) return 0.0f;
  return g.mask[(hd / g.heads) * g.ms[0] + (hd % g.heads) * g.ms[1] + i * g.ms[2] + j * g.ms[3]];
}

// One head of an input: the (batch, head) offset of head hd = b·heads + h,
// in elements from the tensor's first (In: a const float*, or a DIn read
// through ld()).
__device__ __forceinline__ int64_t head_of(const int64_t* st, const Geom& g, int64_t hd) {
  return (hd / g.heads) * st[0] + (hd % g.heads) * st[1];
}

// Row i of head hd of out (its columns adjacent), the same way.
__device__ __forceinline__ int64_t out_row(const Geom& g, int64_t hd, int64_t i) {
  return (hd / g.heads) * g.os[0] + (hd % g.heads) * g.os[1] + i * g.os[2];
}

// dst (n, cols), row stride `ldd`, = the block's rows [r0, r0 + n) of a head
// (at `head` in x) read through (row, column) strides; all threads of the
// block take part.
template <typename In>
__device__ __forceinline__ void stage(float* dst, int ldd, In x, int64_t head, const int64_t* st, int64_t r0, int n,
                                      int cols) {
  for (int e = threadIdx.x; e < n * cols; e += blockDim.x) {
    const int r = e / cols, c = e % cols;
    dst[r * ldd + c] = ld(x, head + (r0 + r) * st[2] + c * st[3]);
  }
}

// A warp's copy of one row of a head into shared memory.
template <typename In>
__device__ __forceinline__ void stage_row(float* dst, In x, int64_t head, const int64_t* st, int64_t r, int cols,
                                          int lane) {
  for (int c = lane; c < cols; c += 32) dst[c] = ld(x, head + r * st[2] + c * st[3]);
}

// a · b over n columns, in increasing order (one lane's dot product).
__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int c = 0; c < n; ++c) s += a[c] * b[c];
  return s;
}

// D = Σ_c dO_c · O_c for one row (contiguous, n columns), in double as the
// CPU's dot_f64, returned to every lane: lane partials in column order, then
// the butterfly. The dq and the dk/dv kernels call it alike, so both see the
// same bits.
// dout's row at `dr`, out's at `orow` (elements from each one's first).
template <typename In>
__device__ __forceinline__ float row_delta(In dout, int64_t dr, In out, int64_t orow, int n, int lane) {
  double s = 0.0;
  for (int c = lane; c < n; c += 32) s += static_cast<double>(ld(dout, dr + c)) * ld(out, orow + c);
  return static_cast<float>(detail::warp_sum(s));
}

// A work item of the forward and the dq kernel: head w / row_blocks, query
// rows [r0, r0 + kWarps); this warp's row, whether it exists, the keys the
// block's last row sees (the most any row of it sees: the tiles the block
// walks) and the keys this warp's row sees (none when it does not exist).
struct QueryRows {
  int64_t head, row, keys, seen;
  bool active;
};
__device__ __forceinline__ QueryRows query_rows(const Geom& g, int64_t w, int64_t row_blocks, int warp) {
  const int64_t r0 = (w % row_blocks) * kWarps, i = r0 + warp;
  const int64_t r_last = (r0 + kWarps < g.tq ? r0 + kWarps : g.tq) - 1;
  const bool active = i < g.tq;
  return {w / row_blocks, i, visible(g, r_last), active ? visible(g, i) : 0, active};
}

// The row at `row` of dst (cols) = or += a warp's row accumulator: column c
// is lane c % 32's acc[c / 32] (a DOut: rounded once, stored or added as its
// `add` says).
template <typename Out>
__device__ __forceinline__ void store_row(Out dst, int64_t row, const float (&acc)[kPerLane], int cols, int lane,
                                          bool accumulate) {
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int c = lane + 32 * t;
    if (c < cols) st(dst, row + c, acc[t], accumulate);
  }
}

// ---- forward ------------------------------------------------------------------
// Work item w: head w / row_blocks, query rows [r0, r0 + kWarps). Each warp
// keeps its row's running max m, Σ exp(s − m) and Σ exp(s − m)·v (online
// softmax, rescaled when m grows) over the key tiles.
// Shared: the warps' q rows (kWarps, d), a key tile (kTile, d + 1) and a value
// tile (kTile, dv + 1) (padded: lane j reads row j).
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    sdpa_fwd_kernel(Geom g, In q, In k, In v, Out out, float* lse, int64_t row_blocks, int64_t work) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(g.d), dv = static_cast<int>(g.dv);
  const int ldk = d + 1, ldv = dv + 1;
  float* qrows = smem;
  float* ks = qrows + kWarps * d;
  float* vs = ks + kTile * ldk;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const QueryRows it = query_rows(g, w, row_blocks, warp);
    const int64_t hd = it.head, i = it.row, keys = it.keys, seen = it.seen;
    const bool active = it.active;
    const int64_t qh = head_of(g.qs, g, hd), kh = head_of(g.ks, g, hd), vh = head_of(g.vs, g, hd);
    __syncthreads();  // the previous item's readers are done with the shared rows
    if (active) stage_row(qrows + warp * d, q, qh, g.qs, i, d, lane);
    float m = -INFINITY, l = 0.0f;
    float acc[kPerLane];
    for (float& a : acc) a = 0.0f;
    for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
      const int n = static_cast<int>(keys - j0 < kTile ? keys - j0 : kTile);
      __syncthreads();  // the previous tile is consumed
      stage(ks, ldk, k, kh, g.ks, j0, n, d);
      stage(vs, ldv, v, vh, g.vs, j0, n, dv);
      __syncthreads();
      if (j0 >= seen) continue;  // warp-uniform: none of this tile is visible to the row
      const int nj = static_cast<int>(seen - j0 < n ? seen - j0 : n);  // >= 1: key j0 is visible
      float s = -INFINITY;
      if (lane < nj) {
        s = dot(qrows + warp * d, ks + lane * ldk, d) * g.scale;
        if (g.mask) s += mask_at(g, hd, i, j0 + lane);
      }
      // Finite once a key is visible and not masked out; -inf while an
      // additive mask has hidden every key so far (then nothing is added).
      const float m_new = fmaxf(m, detail::warp_max(s));
      const bool none = m_new == -INFINITY;
      const float rescale = none ? 1.0f : expf(m - m_new);  // 0 on the first tile (m = -inf)
      const float p = none ? 0.0f : expf(s - m_new);        // 0 where masked
      l = l * rescale + detail::warp_sum(p);
      for (float& a : acc) a *= rescale;
      for (int jj = 0; jj < nj; ++jj) {
        const float pj = __shfl_sync(kFull, p, jj);
        const float* vr = vs + jj * ldv;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int c = lane + 32 * t;
          if (c < dv) acc[t] += pj * vr[c];
        }
      }
      m = m_new;
    }
    if (!active) continue;
    const int64_t orow = out_row(g, hd, i);
    const float inv = 1.0f / l;
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int c = lane + 32 * t;
      if (c < dv) st(out, orow + c, acc[t] * inv, false);
    }
    if (lane == 0) lse[hd * g.tq + i] = m + logf(l);
  }
}

// ---- backward: dq ---------------------------------------------------------------
// Work item as the forward's. Each warp forms its row's D_i = Σ dO_i·O_i, then
// over the key tiles: lane j recomputes P_ij = exp(s_ij − lse_i) and
// dS_ij = P_ij·(dO_i·v_j − D_i)·scale; dq_i = Σ_j dS_ij k_j in key order.
// Shared: the warps' q and dO rows, a key and a value tile (padded).
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    sdpa_bwd_dq_kernel(Geom g, In q, In k, In v, In out, const float* lse, In dout, Out dq, bool acc_q,
                       int64_t row_blocks, int64_t work) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(g.d), dv = static_cast<int>(g.dv);
  const int ldk = d + 1, ldv = dv + 1;
  float* qrows = smem;
  float* dorows = qrows + kWarps * d;
  float* ks = dorows + kWarps * dv;
  float* vs = ks + kTile * ldk;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const QueryRows it = query_rows(g, w, row_blocks, warp);
    const int64_t hd = it.head, i = it.row, keys = it.keys, seen = it.seen;
    const bool active = it.active;
    const int64_t qh = head_of(g.qs, g, hd), kh = head_of(g.ks, g, hd), vh = head_of(g.vs, g, hd);
    const int64_t row = hd * g.tq + i;
    __syncthreads();
    float delta = 0.0f, l = 0.0f;
    if (active) {
      stage_row(qrows + warp * d, q, qh, g.qs, i, d, lane);
      for (int c = lane; c < dv; c += 32) dorows[warp * dv + c] = ld(dout, row * g.dv + c);
      delta = row_delta(dout, row * g.dv, out, out_row(g, hd, i), dv, lane);
      l = lse[row];
    }
    float acc[kPerLane];
    for (float& a : acc) a = 0.0f;
    for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
      const int n = static_cast<int>(keys - j0 < kTile ? keys - j0 : kTile);
      __syncthreads();
      stage(ks, ldk, k, kh, g.ks, j0, n, d);
      stage(vs, ldv, v, vh, g.vs, j0, n, dv);
      __syncthreads();
      if (j0 >= seen) continue;  // warp-uniform
      const int nj = static_cast<int>(seen - j0 < n ? seen - j0 : n);
      float ds = 0.0f;
      if (lane < nj) {
        const float s = dot(qrows + warp * d, ks + lane * ldk, d);
        // s·scale (+ mask) − lse <= 0 but for rounding: clamped, as the CPU.
        const float sm = g.mask ? s * g.scale + mask_at(g, hd, i, j0 + lane) : s * g.scale;
        const float p = expf(fminf(sm - l, 0.0f));
        const float dp = dot(dorows + warp * dv, vs + lane * ldv, dv);
        ds = p * (dp - delta) * g.scale;
      }
      for (int jj = 0; jj < nj; ++jj) {
        const float dsj = __shfl_sync(kFull, ds, jj);
        const float* kr = ks + jj * ldk;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int c = lane + 32 * t;
          if (c < d) acc[t] += dsj * kr[c];
        }
      }
    }
    if (!active) continue;
    store_row(dq, row * g.d, acc, d, lane, acc_q);
  }
}

// ---- backward: dk, dv -----------------------------------------------------------
// Work item w: head w / key_blocks, key rows [j0, j0 + kWarps). Each warp walks
// the query rows that see its key (i >= j when causal) in increasing order, in
// tiles: lane i recomputes P_ij and dS_ij (D_i formed per tile by row_delta,
// lse_i read), then dv_j = Σ_i P_ij dO_i and dk_j = Σ_i dS_ij q_i in query order.
// dk is stored before dv: where k and v are one tensor their gradients are one
// buffer (dv accumulating), and each element is added to by the one lane that
// owns it, dk's share first, as the CPU stores them.
// Shared: the warps' k and v rows, a query tile (kTile, d + 1), a dO tile
// (kTile, dv + 1), the tile's lse and D.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    sdpa_bwd_dkv_kernel(Geom g, In q, In k, In v, In out, const float* lse, In dout, Out dk, Out dv, bool acc_k,
                        bool acc_v, int64_t key_blocks, int64_t work) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(g.d), dvn = static_cast<int>(g.dv);
  const int ldq = d + 1, ldo = dvn + 1;
  float* krows = smem;
  float* vrows = krows + kWarps * d;
  float* qs = vrows + kWarps * dvn;
  float* dos = qs + kTile * ldq;
  float* lses = dos + kTile * ldo;
  float* deltas = lses + kTile;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int64_t hd = w / key_blocks, kb = (w % key_blocks) * kWarps;
    const int64_t qh = head_of(g.qs, g, hd), kh = head_of(g.ks, g, hd), vh = head_of(g.vs, g, hd);
    const int64_t j = kb + warp;
    const bool active = j < g.tk;
    // Query rows that see key j: [j, tq) when causal (empty for j >= tq), else all.
    const int64_t first = active ? (g.causal ? j : 0) : g.tq;
    const int64_t block_first = g.causal ? kb : 0;
    __syncthreads();
    if (active) {
      stage_row(krows + warp * d, k, kh, g.ks, j, d, lane);
      stage_row(vrows + warp * dvn, v, vh, g.vs, j, dvn, lane);
    }
    float acck[kPerLane], accv[kPerLane];
    for (float& a : acck) a = 0.0f;
    for (float& a : accv) a = 0.0f;
    for (int64_t i0 = block_first; i0 < g.tq; i0 += kTile) {
      const int n = static_cast<int>(g.tq - i0 < kTile ? g.tq - i0 : kTile);
      __syncthreads();
      stage(qs, ldq, q, qh, g.qs, i0, n, d);
      for (int e = threadIdx.x; e < n * dvn; e += blockDim.x) {
        const int r = e / dvn, c = e % dvn;
        dos[r * ldo + c] = ld(dout, (hd * g.tq + i0 + r) * g.dv + c);
      }
      for (int r = warp; r < n; r += kWarps) {
        const int64_t row = hd * g.tq + i0 + r;
        const float delta = row_delta(dout, row * g.dv, out, out_row(g, hd, i0 + r), dvn, lane);
        if (lane == 0) {
          deltas[r] = delta;
          lses[r] = lse[row];
        }
      }
      __syncthreads();
      if (i0 + n <= first) continue;  // warp-uniform: no row of this tile sees key j
      const int ii0 = static_cast<int>(first > i0 ? first - i0 : 0);
      float p = 0.0f, ds = 0.0f;
      if (lane >= ii0 && lane < n) {
        const float s = dot(qs + lane * ldq, krows + warp * d, d);
        const float sm = g.mask ? s * g.scale + mask_at(g, hd, i0 + lane, j) : s * g.scale;
        p = expf(fminf(sm - lses[lane], 0.0f));
        const float dp = dot(dos + lane * ldo, vrows + warp * dvn, dvn);
        ds = p * (dp - deltas[lane]) * g.scale;
      }
      for (int ii = ii0; ii < n; ++ii) {
        const float pi = __shfl_sync(kFull, p, ii);
        const float dsi = __shfl_sync(kFull, ds, ii);
        const float* qr = qs + ii * ldq;
        const float* dor = dos + ii * ldo;
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) {
          const int c = lane + 32 * t;
          if (c < dvn) accv[t] += pi * dor[c];
          if (c < d) acck[t] += dsi * qr[c];
        }
      }
    }
    if (!active) continue;
    const int64_t row = hd * g.tk + j;
    if (wanted(dk)) store_row(dk, row * g.d, acck, d, lane, acc_k);
    if (wanted(dv)) store_row(dv, row * g.dv, accv, dvn, lane, acc_v);
  }
}

// ---- launch helpers ---------------------------------------------------------------

constexpr size_t kDefaultSharedBytes = 48 * 1024;

// Launches kernel with `bytes` of dynamic shared memory, raising the
// kernel's limit first where that is above the default 48 KiB (head
// dimensions above about 150).
template <typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t work, size_t bytes, cudaStream_t stream, Args... args) {
  if (bytes > kDefaultSharedBytes)
    CUDA_CHECK_THROW(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  const unsigned grid = static_cast<unsigned>(work < detail::kMaxBlocks ? work : detail::kMaxBlocks);
  kernel<<<grid, kThreads, bytes, stream>>>(args..., work);
  CUDA_CHECK_THROW(cudaGetLastError());
}

int64_t blocks_of(int64_t rows) { return (rows + kWarps - 1) / kWarps; }

// Both variants' launches: In const float* and Out float* (the f32 kernels),
// or DIn and DOut (tensors as stored).
template <typename In, typename Out>
void run_fwd(const cpu::SdpaGeom& g, In q, In k, In v, Out out, float* lse, cudaStream_t stream) {
  const Geom dg = device_geom(g);
  const int64_t heads = g.batch * g.heads, row_blocks = blocks_of(g.tq);
  const size_t bytes = sizeof(float) * static_cast<size_t>(kWarps * g.d + kTile * (g.d + 1) + kTile * (g.dv + 1));
  launch(sdpa_fwd_kernel<In, Out>, heads * row_blocks, bytes, stream, dg, q, k, v, out, lse, row_blocks);
}

template <typename In, typename Out>
void run_bwd(const cpu::SdpaGeom& g, In q, In k, In v, In out, const float* lse, In dout, Out dq, Out dk, Out dv,
             bool acc_q, bool acc_k, bool acc_v, cudaStream_t stream) {
  const Geom dg = device_geom(g);
  const int64_t heads = g.batch * g.heads;
  // dq first: where q is also k or v, the gradients share one buffer and dq
  // (stored, or added) goes in before dk and dv add theirs, as on the CPU.
  if (wanted(dq)) {
    const int64_t row_blocks = blocks_of(g.tq);
    const size_t bytes = sizeof(float) * static_cast<size_t>(kWarps * (g.d + g.dv) + kTile * (g.d + 1) +
                                                              kTile * (g.dv + 1));
    launch(sdpa_bwd_dq_kernel<In, Out>, heads * row_blocks, bytes, stream, dg, q, k, v, out, lse, dout, dq, acc_q,
           row_blocks);
  }
  if (wanted(dk) || wanted(dv)) {
    const int64_t key_blocks = blocks_of(g.tk);
    const size_t bytes = sizeof(float) * static_cast<size_t>(kWarps * (g.d + g.dv) + kTile * (g.d + 1) +
                                                              kTile * (g.dv + 1) + 2 * kTile);
    launch(sdpa_bwd_dkv_kernel<In, Out>, heads * key_blocks, bytes, stream, dg, q, k, v, out, lse, dout, dk, dv,
           acc_k, acc_v, key_blocks);
  }
}

// A gradient the 16-bit backward writes: none where its pointer is null.
DOut grad_out(IoOut o) { return o.p ? detail::dout(o) : DOut{nullptr, IoType::F32, false}; }

}  // namespace

void sdpa_fwd(const cpu::SdpaGeom& g, const float* q, const float* k, const float* v, float* out, float* lse,
              float* /*scratch: unused*/, cudaStream_t stream) {
  check("sdpa_fwd", g);
  run_fwd(g, q, k, v, out, lse, stream);
}

void sdpa_bwd(const cpu::SdpaGeom& g, const float* q, const float* k, const float* v, const float* out,
              const float* lse, const float* dout, float* dq, float* dk, float* dv, bool acc_q, bool acc_k,
              bool acc_v, float* /*scratch: unused*/, cudaStream_t stream) {
  check("sdpa_bwd", g);
  run_bwd(g, q, k, v, out, lse, dout, dq, dk, dv, acc_q, acc_k, acc_v, stream);
}

void sdpa_fwd_io(const cpu::SdpaGeom& g, IoIn q, IoIn k, IoIn v, IoOut out, float* lse, cudaStream_t stream) {
  check("sdpa_fwd_io", g);
  run_fwd(g, detail::din(q), detail::din(k), detail::din(v), detail::dout(out), lse, stream);
}

void sdpa_bwd_io(const cpu::SdpaGeom& g, IoIn q, IoIn k, IoIn v, IoIn out, const float* lse, IoIn dout, IoOut dq,
                 IoOut dk, IoOut dv, cudaStream_t stream) {
  check("sdpa_bwd_io", g);
  // The gradients are three tensors (lowp_io: q, k, v distinct), each told
  // only whether it adds (the f32 kernel's accumulate is false there too).
  run_bwd(g, detail::din(q), detail::din(k), detail::din(v), detail::din(out), lse, detail::din(dout), grad_out(dq),
          grad_out(dk), grad_out(dv), false, false, false, stream);
}

}  // namespace remat::cuda
