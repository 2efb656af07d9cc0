// Which cuDNN query result a convolution plan takes (gpu/kernels/conv_algo_choice.h),
// on synthetic query lists: no GPU, no cuDNN. cuDNN lists its results fastest
// first; conv.cu's plans (gpu/kernels/conv.cu) turn each into a candidate.
#include <gtest/gtest.h>

#include <vector>

#include "gpu/kernels/conv_algo_choice.h"

namespace remat::cuda {
namespace {

// A successful result with accepted math: deterministic or not, a direct sum or not.
AlgoCandidate ok(bool deterministic, bool direct_sum = true) { return {true, deterministic, true, direct_sum}; }

int choose(const std::vector<AlgoCandidate>& c, bool need_direct_sum, bool allow_nondeterministic) {
  return choose_conv_algo(c.data(), static_cast<int>(c.size()), need_direct_sum, allow_nondeterministic);
}

// The backward's usual case: cuDNN ranks an atomic algorithm first. Without
// the option the plan passes over it to the first deterministic one; with it,
// it takes the first.
TEST(ConvAlgoChoice, TheOptionTakesTheFirstRankedWhateverItsDeterminism) {
  const std::vector<AlgoCandidate> list = {ok(false), ok(false), ok(true), ok(true)};
  EXPECT_EQ(choose(list, false, false), 2);
  EXPECT_EQ(choose(list, false, true), 0);
  EXPECT_EQ(choose(list, true, false), 2);
  EXPECT_EQ(choose(list, true, true), 0);
}

// Where a deterministic algorithm is ranked first, the option changes nothing.
TEST(ConvAlgoChoice, ADeterministicFirstIsTakenEitherWay) {
  const std::vector<AlgoCandidate> list = {ok(true), ok(false)};
  EXPECT_EQ(choose(list, false, false), 0);
  EXPECT_EQ(choose(list, false, true), 0);
}

// A failed query result, or one whose math the plan does not run, is never
// taken, however fast or deterministic.
TEST(ConvAlgoChoice, FailedResultsAndRefusedMathAreSkipped) {
  const AlgoCandidate failed{false, true, true, true}, other_math{true, true, false, true};
  const AlgoCandidate failed_atomic{false, false, true, true};
  const std::vector<AlgoCandidate> list = {failed, other_math, failed_atomic, ok(false), ok(true)};
  EXPECT_EQ(choose(list, false, false), 4);
  EXPECT_EQ(choose(list, false, true), 3);
}

// The 16-bit plans ask for a direct sum (no FFT, no Winograd), with the
// option as without: a faster transform-based result is passed over.
TEST(ConvAlgoChoice, SixteenBitPlansTakeDirectSumsOnly) {
  const std::vector<AlgoCandidate> list = {ok(true, false), ok(false, false), ok(false, true), ok(true, true)};
  EXPECT_EQ(choose(list, true, false), 3);
  EXPECT_EQ(choose(list, true, true), 2);
  EXPECT_EQ(choose(list, false, false), 0);
  EXPECT_EQ(choose(list, false, true), 0);
}

// Nothing qualifies: -1 (the plan is then refused and the convolution runs
// elsewhere), for an empty list too.
TEST(ConvAlgoChoice, NoneQualifies) {
  EXPECT_EQ(choose({}, false, true), -1);
  EXPECT_EQ(choose({ok(false), ok(false)}, false, false), -1);
  EXPECT_EQ(choose({ok(true, false)}, true, true), -1);
  EXPECT_EQ(choose({{false, true, true, true}, {true, true, false, true}}, false, true), -1);
  // Only the first `count` results are read.
  const std::vector<AlgoCandidate> list = {ok(false), ok(true)};
  EXPECT_EQ(choose_conv_algo(list.data(), 1, false, false), -1);
  EXPECT_EQ(choose_conv_algo(list.data(), 2, false, false), 1);
}

}  // namespace
}  // namespace remat::cuda
