// torch.topk's indices and torch.gather (cpu_kernels.h): a MoE router's top-k
// experts and the pick of their outputs. Both read their inputs through
// element strides; the gather's backward walks dx's elements and sums, for
// each, the dy positions along the axis that picked it, so no two writes meet
// and the order is fixed (the CUDA kernel's, one thread per dx element).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {

int64_t TopKGeom::lines() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    if (d != axis) n *= shape[d];
  return n;
}

int64_t GatherGeom::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

int64_t GatherGeom::x_numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= x_shape[d];
  return n;
}

namespace {

// a ranks above b: the larger value, NaN above every number, a tie to the lower position.
bool ranks_above(float a, int64_t ia, float b, int64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// Row-major coordinates of element i over `shape` (rank dims), into c.
void coords(int64_t i, const int64_t* shape, int rank, int64_t* c) {
  for (int d = rank; d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
}

}  // namespace

void topk_fwd(const TopKGeom& g, const float* x, int64_t* index) {
  const int64_t n = g.shape[g.axis], lines = g.lines();
  // The other dimensions, row-major, for the lines' starts and the output's layout.
  int64_t outer_shape[TopKGeom::kMaxRank], c[TopKGeom::kMaxRank];
  int r = 0;
  for (int d = 0; d < g.rank; ++d)
    if (d != g.axis) outer_shape[r++] = g.shape[d];
  int64_t inner = 1;  // the output's elements after the axis
  for (int d = g.axis + 1; d < g.rank; ++d) inner *= g.shape[d];
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t line = 0; line < lines; ++line) {
    coords(line, outer_shape, r, c);
    int64_t at = 0;
    for (int d = 0, j = 0; d < g.rank; ++d)
      if (d != g.axis) at += c[j++] * g.stride[d];
    const int64_t step = g.stride[g.axis];
    for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
    std::partial_sort(order.begin(), order.begin() + g.k, order.end(), [&](int64_t a, int64_t b) {
      return ranks_above(x[at + a * step], a, x[at + b * step], b);
    });
    // The output (outer..., k, inner...): line = o·inner + q.
    const int64_t o = line / inner, q = line % inner;
    for (int64_t j = 0; j < g.k; ++j) index[(o * g.k + j) * inner + q] = order[static_cast<std::size_t>(j)];
  }
}

void gather_fwd(const GatherGeom& g, const float* x, const int64_t* index, float* y) {
  const int64_t n = g.numel();
  int64_t c[GatherGeom::kMaxRank];
  for (int64_t i = 0; i < n; ++i) {
    coords(i, g.shape, g.rank, c);
    int64_t ii = 0, xi = 0;
    for (int d = 0; d < g.rank; ++d) ii += c[d] * g.i_stride[d];
    const int64_t pick = index[ii];
    for (int d = 0; d < g.rank; ++d) xi += (d == g.axis ? pick : c[d]) * g.x_stride[d];
    y[i] = x[xi];
  }
}

void gather_bwd(const GatherGeom& g, const int64_t* index, const float* dy, float* dx, bool accumulate) {
  const int64_t n = g.x_numel();
  int64_t c[GatherGeom::kMaxRank];
  int64_t dy_stride[GatherGeom::kMaxRank];  // dy is contiguous over the index's shape
  for (int64_t d = g.rank, s = 1; d-- > 0;) {
    dy_stride[d] = s;
    s *= g.shape[d];
  }
  for (int64_t e = 0; e < n; ++e) {
    coords(e, g.x_shape, g.rank, c);
    double sum = 0;
    bool inside = true;  // outside the axis, an index shorter than x picks nothing here
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
    dx[e] = accumulate ? dx[e] + static_cast<float>(sum) : static_cast<float>(sum);
  }
}

}  // namespace remat::cpu
