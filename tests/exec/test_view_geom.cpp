// view_geom.h: a view's copy, its gradient's add back and an Expand's sum as
// pointwise geometries (the CUDA backend runs them on its pointwise kernels).
// On random maps (permuted, stepped, offset, repeated dimensions; as built and
// coalesced) the CPU pointwise kernels on those geometries give the bits of a
// plain loop over the map (for_each_mapped): the copy and the add exactly,
// the sum as doubles added in view order; and maps that do not fit are refused.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/exec/view_geom.h"

namespace remat {
namespace {

struct Gen {
  std::mt19937 rng{20261128};
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  // A map into an input of `input_n` elements: dimensions of size 1..4 laid
  // over the input's row-major strides in a random order, every other one
  // stepped by 2 sometimes, with an offset, and (repeat) some read again
  // through stride 0.
  ViewMap map(bool repeat, int64_t& input_n) {
    ViewMap m;
    const int rank = static_cast<int>(pick(0, 5));
    for (int d = 0; d < rank; ++d) m.shape.push_back(pick(1, 4));
    std::vector<int> order(static_cast<std::size_t>(rank));
    for (int d = 0; d < rank; ++d) order[static_cast<std::size_t>(d)] = d;
    std::shuffle(order.begin(), order.end(), rng);
    m.stride.assign(static_cast<std::size_t>(rank), 0);
    int64_t at = 1;
    for (int i = rank; i-- > 0;) {
      const auto d = static_cast<std::size_t>(order[static_cast<std::size_t>(i)]);
      if (repeat && pick(0, 2) == 0) continue;  // stride 0
      const int64_t step = pick(0, 3) == 0 ? 2 : 1;
      m.stride[d] = at * step;
      at *= m.shape[d] * step;
    }
    m.base = pick(0, 3);
    input_n = m.base + at;
    return m;
  }
  std::vector<float> values(int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& e : v) e = static_cast<float>(pick(-999, 999)) / 37.0f;
    return v;
  }
};

int64_t numel(const ViewMap& m) {
  int64_t n = 1;
  for (const int64_t s : m.shape) n *= s;
  return n;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ViewGeom, CopyAndAddBackGiveTheLoopsBits) {
  Gen gen;
  for (int trial = 0; trial < 300; ++trial) {
    int64_t input_n = 0;
    const ViewMap built = gen.map(false, input_n);
    const ViewMap maps[2] = {built, coalesced(built)};
    for (int c = 0; c < 2; ++c) {
      const ViewMap& m = maps[c];
      const std::string what = "trial " + std::to_string(trial) + (c ? " coalesced" : "");
      const std::vector<float> x = gen.values(input_n);
      std::vector<float> want(static_cast<std::size_t>(numel(m))), got(want.size(), -1.0f);
      for_each_mapped(m, [&](int64_t vi, int64_t xi) { want[static_cast<std::size_t>(vi)] = x[static_cast<std::size_t>(xi)]; });
      cpu::PwGeom g;
      ASSERT_TRUE(copy_geom(m, g)) << what;
      const float* in[3] = {x.data() + m.base, nullptr, nullptr};
      cpu::pointwise_fwd(g, in, got.data());
      ASSERT_TRUE(same_bits(got, want)) << what << " copy";

      const std::vector<float> dy = gen.values(numel(m));
      std::vector<float> dx_want = gen.values(input_n), dx_got = dx_want;
      for_each_mapped(m, [&](int64_t vi, int64_t xi) {
        dx_want[static_cast<std::size_t>(xi)] += dy[static_cast<std::size_t>(vi)];
      });
      ASSERT_TRUE(add_back_geom(m, g)) << what;
      float* dst = dx_got.data() + m.base;
      const float* ab[3] = {dst, dy.data(), nullptr};
      cpu::pointwise_fwd(g, ab, dst);
      ASSERT_TRUE(same_bits(dx_got, dx_want)) << what << " add back";
    }
  }
}

TEST(ViewGeom, ExpandSumAddsEachInputElementsTermsInViewOrder) {
  Gen gen;
  int summed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int64_t input_n = 0;
    ViewMap built = gen.map(true, input_n);
    built.base = 0;  // an Expand's map starts at its input's first element
    const ViewMap maps[2] = {built, coalesced(built)};
    for (int c = 0; c < 2; ++c) {
      const ViewMap& m = maps[c];
      const std::string what = "trial " + std::to_string(trial) + (c ? " coalesced" : "");
      cpu::PwGeom g;
      // Stepped strides leave holes: not an input in row-major order.
      bool row_major = true;
      int64_t at = 1;
      for (std::size_t d = m.shape.size(); d-- > 0;) {
        if (m.stride[d] == 0 || m.shape[d] == 1) continue;
        row_major = row_major && m.stride[d] == at;
        at *= m.shape[d];
      }
      ASSERT_EQ(expand_sum_geom(m, g), row_major) << what;
      if (!row_major) continue;
      ++summed;
      const int64_t n_in = at;
      const std::vector<float> dy = gen.values(numel(m));
      std::vector<double> sum(static_cast<std::size_t>(n_in), 0.0);
      for_each_mapped(m, [&](int64_t vi, int64_t xi) { sum[static_cast<std::size_t>(xi)] += dy[static_cast<std::size_t>(vi)]; });
      for (const bool acc : {false, true}) {
        std::vector<float> got = gen.values(n_in), want = got;
        for (std::size_t j = 0; j < want.size(); ++j)
          want[j] = acc ? want[j] + static_cast<float>(sum[j]) : static_cast<float>(sum[j]);
        const float* none[3] = {nullptr, nullptr, nullptr};
        cpu::pointwise_bwd(g, 0, none, nullptr, dy.data(), got.data(), acc);
        ASSERT_TRUE(same_bits(got, want)) << what << (acc ? " accumulate" : "");
      }
    }
  }
  EXPECT_GT(summed, 100);
}

TEST(ViewGeom, MapsThatDoNotFitAreRefused) {
  cpu::PwGeom g;
  const ViewMap repeat{{3, 4}, {0, 1}, 0};
  EXPECT_FALSE(add_back_geom(repeat, g));  // several elements to one
  const ViewMap offset{{3, 4}, {0, 1}, 5};
  EXPECT_FALSE(expand_sum_geom(offset, g));
  const ViewMap transposed{{3, 4}, {1, 3}, 0};  // kept, but not row-major
  EXPECT_TRUE(expand_sum_geom(ViewMap{{3, 4}, {4, 1}, 0}, g));
  EXPECT_FALSE(expand_sum_geom(transposed, g));
  const ViewMap nine{std::vector<int64_t>(9, 2), std::vector<int64_t>(9, 1), 0};
  EXPECT_FALSE(copy_geom(nine, g));
  EXPECT_FALSE(add_back_geom(nine, g));
  EXPECT_FALSE(expand_sum_geom(nine, g));
}

}  // namespace
}  // namespace remat
