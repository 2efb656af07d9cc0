// Concatenation and embedding lookup: copies and row sums, no arithmetic to
// speak of. Indices are all checked before anything is written, so a bad one
// leaves the output untouched.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/kernels/cpu_kernels.h"

namespace remat::cpu {
namespace {

template <typename Index>
void check_indices(const char* who, const Index* idx, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= vocab) {
      throw std::invalid_argument(std::string(who) + ": index " + std::to_string(idx[i]) + " at position " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
}

}  // namespace

void concat_fwd(const float* const* xs, const int64_t* widths, int64_t count, float* y, int64_t outer,
                int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t len = widths[i] * inner;
      std::memcpy(y, xs[i] + o * len, sizeof(float) * len);
      y += len;
    }
  }
}

void concat_bwd(const float* dy, float* const* dxs, const int64_t* widths, int64_t count, int64_t outer,
                int64_t inner, const uint8_t* accumulate) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t len = widths[i] * inner;
      if (dxs[i] != nullptr) {
        float* dst = dxs[i] + o * len;
        if (accumulate[i] != 0) {
          for (int64_t j = 0; j < len; ++j) dst[j] += dy[j];
        } else {
          std::memcpy(dst, dy, sizeof(float) * len);
        }
      }
      dy += len;
    }
  }
}

namespace {

template <typename Index>
void gather_rows(const float* table, const Index* idx, float* y, int64_t n, int64_t dim, int64_t vocab) {
  check_indices("embedding", idx, n, vocab);
  for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * dim, table + static_cast<int64_t>(idx[i]) * dim, sizeof(float) * dim);
}

template <typename Index>
void scatter_rows(const float* dy, const Index* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab) {
  check_indices("embedding", idx, n, vocab);
  // Positions in increasing order: a row used several times sums them in that order.
  for (int64_t i = 0; i < n; ++i) {
    float* row = dtable + static_cast<int64_t>(idx[i]) * dim;
    const float* g = dy + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += g[j];
  }
}

}  // namespace

void embedding_fwd(const float* table, const int32_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab) {
  gather_rows(table, idx, y, n, dim, vocab);
}
void embedding_fwd(const float* table, const int64_t* idx, float* y, int64_t n, int64_t dim, int64_t vocab) {
  gather_rows(table, idx, y, n, dim, vocab);
}
void embedding_bwd(const float* dy, const int32_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab) {
  scatter_rows(dy, idx, dtable, n, dim, vocab);
}
void embedding_bwd(const float* dy, const int64_t* idx, float* dtable, int64_t n, int64_t dim, int64_t vocab) {
  scatter_rows(dy, idx, dtable, n, dim, vocab);
}

}  // namespace remat::cpu
