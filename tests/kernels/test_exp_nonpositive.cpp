// The softmax's vectorisable exp against the exact exponential: every float
// in a stride through [-87, 0] within 1 ulp (99% correctly rounded), and the edges (0, -0, the cut-off,
// -inf, NaN) exactly as documented.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include <gtest/gtest.h>

#include "core/kernels/exp_nonpositive.h"

namespace remat::cpu {
namespace {

// Floats between a and b, both positive and finite, in units in the last place.
int64_t ulps_apart(float a, float b) {
  return std::llabs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b));
}

TEST(ExpNonpositive, WithinOneUlpOfTheExactValueDownToTheCutOff) {
  // The bit patterns of -0 .. -87 (the sign bit set, magnitude increasing);
  // an odd stride visits every exponent and mantissas of every residue.
  const uint32_t lo = std::bit_cast<uint32_t>(-0.0f), hi = std::bit_cast<uint32_t>(-87.0f);
  int64_t worst = 0, checked = 0;
  float worst_x = 0;
  for (uint32_t bits = lo; bits <= hi; bits += 1009) {
    const float x = std::bit_cast<float>(bits);
    const float exact = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t d = ulps_apart(exp_nonpositive(x), exact);
    if (d > worst) worst = d, worst_x = x;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
  EXPECT_LE(worst, 1) << "at x = " << worst_x;
}

TEST(ExpNonpositive, EdgesAreExact) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);  // the row maximum's weight
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-87.0f), static_cast<float>(std::exp(-87.0)));
  EXPECT_EQ(exp_nonpositive(std::nextafter(-87.0f, -100.0f)), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1e30f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);  // a masked score
  EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp_nonpositive(-1.0f), static_cast<float>(std::exp(-1.0)));
}

}  // namespace
}  // namespace remat::cpu
