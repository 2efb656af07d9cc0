// Concatenation along a middle axis and embedding lookup: exact copies and
// sums, per-input accumulate flags, repeated and out-of-range indices.
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::garbage;
using test::random_floats;

// Three inputs (outer = 2, widths 1, 3, 2, inner = 4) joined on the middle axis.
TEST(Concat, MiddleAxisForwardAndBackward) {
  const int64_t outer = 2, inner = 4, count = 3;
  const int64_t widths[] = {1, 3, 2};
  const int64_t total = 6;
  std::vector<std::vector<float>> xs;
  for (int64_t i = 0; i < count; ++i) xs.push_back(random_floats(outer * widths[i] * inner, 110 + i));
  const float* ptrs[] = {xs[0].data(), xs[1].data(), xs[2].data()};
  std::vector<float> y(outer * total * inner);
  concat_fwd(ptrs, widths, count, y.data(), outer, inner);
  // y[o][a][j] is input i's [o][a − offset_i][j] for the input whose span holds a.
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < total; ++a)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t i = a < 1 ? 0 : a < 4 ? 1 : 2;
        const int64_t off = i == 0 ? 0 : i == 1 ? 1 : 4;
        EXPECT_EQ(y[(o * total + a) * inner + j], xs[i][(o * widths[i] + a - off) * inner + j]) << o << a << j;
      }

  // Backward: the gradient of concat is the slicing of dy; input 0 overwrites
  // (from NaN), input 1 has no gradient, input 2 accumulates.
  const auto dy = random_floats(y.size(), 120);
  std::vector<float> dx0(xs[0].size(), std::numeric_limits<float>::quiet_NaN());
  const auto start2 = garbage(xs[2].size());
  auto dx2 = start2;
  float* dxs[] = {dx0.data(), nullptr, dx2.data()};
  const uint8_t acc[] = {0, 1, 1};
  concat_bwd(dy.data(), dxs, widths, count, outer, inner, acc);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) EXPECT_EQ(dx0[o * inner + j], dy[(o * total + 0) * inner + j]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t at = (o * 2 + a) * inner + j;
        EXPECT_EQ(dx2[at], start2[at] + dy[(o * total + 4 + a) * inner + j]);
      }
}

TEST(Embedding, LookupCopiesRows) {
  const int64_t vocab = 5, dim = 3;
  const auto table = random_floats(vocab * dim, 121);
  const int32_t idx[] = {4, 0, 4, 2};
  std::vector<float> y(4 * dim);
  embedding_fwd(table.data(), idx, y.data(), 4, dim, vocab);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(y[i * dim + j], table[idx[i] * dim + j]);
}

TEST(Embedding, GradientSumsRepeatedIndicesInPositionOrder) {
  const int64_t vocab = 4, dim = 2, n = 5;
  const int32_t idx[] = {1, 3, 1, 1, 0};
  const auto dy = random_floats(n * dim, 122);
  const auto start = garbage(vocab * dim);
  auto dtable = start;
  embedding_bwd(dy.data(), idx, dtable.data(), n, dim, vocab);
  for (int64_t j = 0; j < dim; ++j) {
    EXPECT_EQ(dtable[0 * dim + j], start[j] + dy[4 * dim + j]);
    // Row 1 receives positions 0, 2, 3 in that order.
    EXPECT_EQ(dtable[1 * dim + j], ((start[dim + j] + dy[j]) + dy[2 * dim + j]) + dy[3 * dim + j]);
    EXPECT_EQ(dtable[2 * dim + j], start[2 * dim + j]);  // unused row untouched
    EXPECT_EQ(dtable[3 * dim + j], start[3 * dim + j] + dy[dim + j]);
  }
}

TEST(Embedding, OutOfRangeIndexThrowsBeforeWriting) {
  const int64_t vocab = 3, dim = 2;
  const auto table = random_floats(vocab * dim, 123);
  for (const int32_t bad : {3, -1}) {
    SCOPED_TRACE(bad);
    const int32_t idx[] = {0, 2, bad};
    std::vector<float> y(3 * dim, 7.0f);
    try {
      embedding_fwd(table.data(), idx, y.data(), 3, dim, vocab);
      ADD_FAILURE() << "accepted index " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("at position 2"), std::string::npos) << e.what();
    }
    EXPECT_EQ(y, std::vector<float>(3 * dim, 7.0f));
    const auto dy = random_floats(3 * dim, 124);
    const auto start = garbage(vocab * dim);
    auto dtable = start;
    EXPECT_THROW(embedding_bwd(dy.data(), idx, dtable.data(), 3, dim, vocab), std::invalid_argument);
    EXPECT_EQ(dtable, start);
  }
}

}  // namespace
}  // namespace remat::cpu
