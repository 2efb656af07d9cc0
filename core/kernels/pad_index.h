// Which input element each output element of a Pad reads (or the fill), and
// which output elements read each input element. Host and device compile the
// same code (the CPU kernels in pad.cpp, the CUDA ones in gpu/kernels/pad.cu),
// so both backends agree on every index and every sum.
//
// Per padded dimension, output coordinate o sits at p = o - before in the
// input's coordinates (before < 0: cropped), and reads
//   constant   p if 0 <= p < in, else the fill value
//   reflect    p mirrored at the edges without repeating them (-p, 2(in-1)-p)
//   replicate  p clamped to [0, in-1]
//   circular   p modulo in
// as PyTorch's constant_pad_nd, reflection_padNd, replication_padNd and
// _pad_circular do (reflect needs pads < in, circular pads <= in: the rules
// check it, so at most one reflection or wrap per side).
//
// The backward gathers instead of scattering (no atomics on the GPU): input
// element i sums the gradient of every output element that read it, in
// PyTorch's order, so with its bits:
//   reflect, replicate  in increasing output order (row-major) from 0: the CPU
//                       backward adds each output's gradient into a zeroed
//                       grad_input, walking the output row by row;
//   constant            the one reader's gradient as it is (a slice);
//   circular            _pad_circular copies x into the middle of a new
//                       buffer, then each border from the buffer's far side,
//                       the last dimension first, begin then end; autograd
//                       (CopySlices) undoes the copies in reverse, adding each
//                       border's gradient into its source. So along the first
//                       padded dimension the element's own gradient comes
//                       first, then the wrap from the end, then from the start,
//                       and those sums are what the next dimension adds up the
//                       same way (pad_grad_circular).
#pragma once
#include <cstdint>

#include "core/kernels/pad_geom.h"

#if defined(__CUDACC__)
#define REMAT_PAD_HD __host__ __device__ __forceinline__
#else
#define REMAT_PAD_HD inline
#endif

namespace remat {

// The input coordinate output coordinate o reads along one dimension, or -1
// for the fill (constant mode only).
REMAT_PAD_HD int64_t pad_source(PadMode mode, int64_t o, int64_t in, int64_t before) {
  int64_t p = o - before;
  switch (mode) {
    case PadMode::Constant: return p >= 0 && p < in ? p : -1;
    case PadMode::Reflect:
      if (p < 0) p = -p;
      if (p >= in) p = 2 * (in - 1) - p;
      return p;
    case PadMode::Replicate: return p < 0 ? 0 : p >= in ? in - 1 : p;
    case PadMode::Circular: p %= in; return p < 0 ? p + in : p;
  }
  return -1;
}

// The output coordinates along one dimension that read input coordinate i, as
// up to three ranges [lo[k], hi[k]] in increasing order; returns how many.
REMAT_PAD_HD int pad_readers(PadMode mode, int64_t i, int64_t in, int64_t out, int64_t before, int64_t lo[3],
                             int64_t hi[3]) {
  int n = 0;
  auto put = [&](int64_t a, int64_t b) {
    if (a < 0) a = 0;
    if (b > out - 1) b = out - 1;
    if (a <= b) lo[n] = a, hi[n] = b, ++n;
  };
  const int64_t at = i + before;  // where the output holds i itself
  switch (mode) {
    case PadMode::Constant: put(at, at); break;
    case PadMode::Reflect:
      if (i > 0) put(before - i, before - i);              // mirrored at the first edge
      put(at, at);
      if (i < in - 1) put(before + 2 * (in - 1) - i, before + 2 * (in - 1) - i);  // at the last edge
      break;
    case PadMode::Replicate:
      if (in == 1) put(0, out - 1);
      else if (i == 0) put(0, at);
      else if (i == in - 1) put(at, out - 1);
      else put(at, at);
      break;
    case PadMode::Circular:
      put(at - in, at - in);
      put(at, at);
      put(at + in, at + in);
      break;
  }
  return n;
}

// Output element `o` (row-major over g.out): the input element it reads
// from the dense x, or the fill.
REMAT_PAD_HD float pad_read(const PadGeom& g, const float* x, int64_t o) {
  int64_t src = 0, stride = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t od = o % g.out[d];
    o /= g.out[d];
    const int64_t s = pad_source(g.mode, od, g.in[d], g.before[d]);
    if (s < 0) return g.value;
    src += s * stride;
    stride *= g.in[d];
  }
  return x[src];
}

// Circular padding's gradient of input element `i`, in CopySlices' order
// (above): a fold per dimension, the first dimension's innermost, each over
// the element's own position, then the wrap from the end, then from the start.
REMAT_PAD_HD float pad_grad_circular(const PadGeom& g, const float* dy, int64_t i) {
  int64_t at[PadGeom::kMaxRank][3];
  int n[PadGeom::kMaxRank], j[PadGeom::kMaxRank];
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t own = i % g.in[d] + g.before[d];
    i /= g.in[d];
    n[d] = 0;
    at[d][n[d]++] = own;
    if (own + g.in[d] < g.out[d]) at[d][n[d]++] = own + g.in[d];
    if (own - g.in[d] >= 0) at[d][n[d]++] = own - g.in[d];
    j[d] = 0;
  }
  float acc[PadGeom::kMaxRank];
  for (;;) {
    int64_t o = 0;
    for (int d = 0; d < g.rank; ++d) o = o * g.out[d] + at[d][j[d]];
    // Fold dy[o] into dimension 0's sum; a finished sum into the next one's.
    float carry = dy[o];
    for (int d = 0;; ++d) {
      acc[d] = j[d] == 0 ? carry : acc[d] + carry;
      if (++j[d] < n[d]) break;
      j[d] = 0;
      carry = acc[d];
      if (d == g.rank - 1) return carry;
    }
  }
}

// The gradient of input element `i` (row-major over g.in): the sum of dy over
// the output elements that read it, in PyTorch's order (above).
REMAT_PAD_HD float pad_grad(const PadGeom& g, const float* dy, int64_t i) {
  if (g.mode == PadMode::Circular) return pad_grad_circular(g, dy, i);
  int64_t lo[PadGeom::kMaxRank][3], hi[PadGeom::kMaxRank][3];
  int nr[PadGeom::kMaxRank];
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t id = i % g.in[d];
    i /= g.in[d];
    nr[d] = pad_readers(g.mode, id, g.in[d], g.out[d], g.before[d], lo[d], hi[d]);
    if (nr[d] == 0) return 0.0f;  // cropped away
  }
  // An odometer over the dimensions' ranges, the last dimension fastest.
  int r[PadGeom::kMaxRank];
  int64_t at[PadGeom::kMaxRank];
  for (int d = 0; d < g.rank; ++d) r[d] = 0, at[d] = lo[d][0];
  float sum = 0.0f;
  for (;;) {
    int64_t o = 0;
    for (int d = 0; d < g.rank; ++d) o = o * g.out[d] + at[d];
    if (g.mode == PadMode::Constant) return dy[o];  // its one reader
    sum += dy[o];
    int d = g.rank - 1;
    for (; d >= 0; --d) {
      if (at[d] < hi[d][r[d]]) {
        ++at[d];
        break;
      }
      if (r[d] + 1 < nr[d]) {
        at[d] = lo[d][++r[d]];
        break;
      }
      r[d] = 0;
      at[d] = lo[d][0];
    }
    if (d < 0) return sum;
  }
}

}  // namespace remat
