// Add and dropout. Dropout's mask is never stored, so most of these tests pin
// down that it is a pure function of (seed, op, index) and that backward sees
// exactly the forward's mask.
#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "core/kernels/rng.h"
#include "tests/kernels/grad_check.h"

namespace remat::cpu {
namespace {

using test::expect_grad_near;
using test::garbage;
using test::numeric_grad;
using test::random_floats;
using test::to_double;
using test::weighted_sum;

constexpr uint64_t kSeed = 0x5EEDull;

std::vector<bool> mask_of(uint64_t seed, uint32_t op, int64_t n, float p) {
  std::vector<bool> m(n);
  for (int64_t i = 0; i < n; ++i) m[i] = dropout_keep(seed, op, static_cast<uint64_t>(i), p);
  return m;
}

TEST(Add, ForwardAndAddInto) {
  const float a[] = {1, 2, 3}, b[] = {0.5f, -2, 10};
  float y[3];
  add_fwd(a, b, y, 3);
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{1.5f, 0, 13}));

  float dst[] = {7, 7, 7};
  add_into(a, dst, 3, false);
  EXPECT_EQ(std::vector<float>(dst, dst + 3), (std::vector<float>{1, 2, 3}));
  add_into(b, dst, 3, true);
  EXPECT_EQ(std::vector<float>(dst, dst + 3), (std::vector<float>{1.5f, 0, 13}));
}

TEST(Dropout, KeepForwardsToRngKeep) {
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(dropout_keep(kSeed, 3, i, 0.3f), rng_keep(kSeed, 3, i, 0.3f)) << i;
  }
}

TEST(Dropout, SameKeyGivesSameMask) {
  const auto x = random_floats(4096, 60);
  std::vector<float> y1(x.size()), y2(x.size());
  dropout_fwd(x.data(), y1.data(), 4096, 0.5f, kSeed, 7);
  dropout_fwd(x.data(), y2.data(), 4096, 0.5f, kSeed, 7);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(mask_of(kSeed, 7, 4096, 0.5f), mask_of(kSeed, 7, 4096, 0.5f));
}

TEST(Dropout, DifferentOpOrSeedGivesDifferentMask) {
  const int64_t n = 4096;
  const auto base = mask_of(kSeed, 7, n, 0.5f);
  for (const auto& other : {mask_of(kSeed, 8, n, 0.5f), mask_of(kSeed + 1, 7, n, 0.5f)}) {
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += base[i] != other[i];
    // Independent masks at p = 0.5 disagree on about half the elements.
    EXPECT_GT(differ, n * 4 / 10);
    EXPECT_LT(differ, n * 6 / 10);
  }
}

TEST(Dropout, KeptFractionMatchesOneMinusP) {
  const int64_t n = 100000;
  const std::vector<float> x(n, 1.0f);
  std::vector<float> y(n);
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    dropout_fwd(x.data(), y.data(), n, p, kSeed, 11);
    int64_t kept = 0;
    for (const float v : y) kept += v != 0.0f;
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01) << "p=" << p;
  }
}

TEST(Dropout, KeptElementsAreScaledOthersZero) {
  const float p = 0.25f;
  const auto x = random_floats(1000, 61, 0.5f, 2.0f);  // never zero
  std::vector<float> y(x.size());
  dropout_fwd(x.data(), y.data(), 1000, p, kSeed, 12);
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < 1000; ++i) {
    if (dropout_keep(kSeed, 12, static_cast<uint64_t>(i), p)) {
      EXPECT_FLOAT_EQ(y[i], x[i] * scale) << i;
    } else {
      EXPECT_EQ(y[i], 0.0f) << i;
    }
  }
}

TEST(Dropout, PZeroIsIdentity) {
  const auto x = random_floats(1000, 62);
  std::vector<float> y(x.size()), dx(x.size());
  dropout_fwd(x.data(), y.data(), 1000, 0.0f, kSeed, 13);
  EXPECT_EQ(y, x);
  dropout_bwd(x.data(), dx.data(), 1000, 0.0f, kSeed, 13, false);
  EXPECT_EQ(dx, x);
}

TEST(Dropout, POneDropsEverythingWithoutNan) {
  const auto x = random_floats(1000, 63);
  std::vector<float> y(x.size(), 1.0f), dx(x.size(), 1.0f);
  dropout_fwd(x.data(), y.data(), 1000, 1.0f, kSeed, 14);
  dropout_bwd(x.data(), dx.data(), 1000, 1.0f, kSeed, 14, false);
  EXPECT_EQ(y, std::vector<float>(1000, 0.0f));
  EXPECT_EQ(dx, std::vector<float>(1000, 0.0f));
}

TEST(Dropout, RejectsPOutsideUnitInterval) {
  float x[1] = {1}, y[1];
  EXPECT_THROW(dropout_fwd(x, y, 1, -0.1f, kSeed, 0), std::invalid_argument);
  EXPECT_THROW(dropout_fwd(x, y, 1, 1.5f, kSeed, 0), std::invalid_argument);
  EXPECT_THROW(dropout_bwd(x, y, 1, NAN, kSeed, 0, false), std::invalid_argument);
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  const float p = 0.4f;
  const int64_t n = 5000;
  const auto x = random_floats(n, 64, 0.5f, 2.0f);
  const auto dy = random_floats(n, 65, 0.5f, 2.0f);
  std::vector<float> y(n), dx(n);
  dropout_fwd(x.data(), y.data(), n, p, kSeed, 15);
  dropout_bwd(dy.data(), dx.data(), n, p, kSeed, 15, false);
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i] != 0.0f, dx[i] != 0.0f) << i;
    if (y[i] != 0.0f) {
      // Same scale, bit for bit, in both directions.
      EXPECT_EQ(dx[i], dy[i] * scale) << i;
      EXPECT_EQ(y[i], x[i] * scale) << i;
    }
  }
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  const float p = 0.3f;
  const int64_t n = 300;
  const auto x = random_floats(n, 66);
  const auto dy = random_floats(n, 67);
  std::vector<float> dx(n);
  dropout_bwd(dy.data(), dx.data(), n, p, kSeed, 16, false);
  auto xd = to_double(x);
  const auto keep = mask_of(kSeed, 16, n, p);
  auto loss = [&] {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = keep[i] ? xd[i] / (1.0 - p) : 0.0;
    return weighted_sum(y, dy);
  };
  expect_grad_near(dx, numeric_grad(xd, loss), "dx");
}

TEST(Dropout, AccumulateFalseOverwritesTrueAdds) {
  const float p = 0.5f;
  const int64_t n = 256;
  const auto dy = random_floats(n, 68);
  std::vector<float> fresh(n, 0.0f);
  dropout_bwd(dy.data(), fresh.data(), n, p, kSeed, 17, false);
  auto over = garbage(n);
  dropout_bwd(dy.data(), over.data(), n, p, kSeed, 17, false);
  EXPECT_EQ(over, fresh);
  const auto start = garbage(n);
  auto added = start;
  dropout_bwd(dy.data(), added.data(), n, p, kSeed, 17, true);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(added[i], start[i] + fresh[i]) << i;
  // p == 0 takes its own path; it must honour accumulate too.
  added = start;
  dropout_bwd(dy.data(), added.data(), n, 0.0f, kSeed, 17, true);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(added[i], start[i] + dy[i]) << i;
}

}  // namespace
}  // namespace remat::cpu
