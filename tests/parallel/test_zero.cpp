// ZeRO against Rajbhandari et al. 2020 ("ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models"), Figure 1: Psi = 7.5B parameters,
// N_d = 64 data-parallel GPUs, mixed-precision Adam (K = 12: fp32 master
// weights, momentum and variance), fp16 weights and gradients:
//   baseline (2 + 2 + K) Psi            = 120 GB
//   P_os     2 Psi + 2 Psi + K Psi / N_d = 31.4 GB
//   P_os+g   2 Psi + (2 + K) Psi / N_d  = 16.6 GB
//   P_os+g+p (2 + 2 + K) Psi / N_d      = 1.9 GB
// (GB = 10^9 bytes, as the paper's figures are.)
#include <gtest/gtest.h>

#include <cmath>

#include "core/analysis/step_memory.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/rank_model.h"
#include "core/parallel/zero.h"

using namespace remat;

namespace {

double gb_one_decimal(uint64_t bytes) { return std::round(static_cast<double>(bytes) / 1e9 * 10) / 10; }

}  // namespace

TEST(Zero, Figure1Of75BOn64Gpus) {
  const uint64_t psi = 7'500'000'000ull;
  const ModelStates full{.weights = 2 * psi, .gradients = 2 * psi, .optimizer = 12 * psi};
  const uint64_t n = 64;
  const ModelStates s0 = zero_shard(full, 64, 0), s1 = zero_shard(full, 64, 1), s2 = zero_shard(full, 64, 2),
                    s3 = zero_shard(full, 64, 3);
  // Exactly the paper's expressions (Psi / 64 is a whole number of bytes here).
  EXPECT_EQ(s0.total(), 16 * psi);
  EXPECT_EQ(s1.total(), 4 * psi + 12 * psi / n);
  EXPECT_EQ(s2.total(), 2 * psi + 14 * psi / n);
  EXPECT_EQ(s3.total(), 16 * psi / n);
  // And as Figure 1 prints them.
  EXPECT_EQ(gb_one_decimal(s0.total()), 120.0);
  EXPECT_EQ(gb_one_decimal(s1.total()), 31.4);
  EXPECT_EQ(gb_one_decimal(s2.total()), 16.6);
  EXPECT_EQ(gb_one_decimal(s3.total()), 1.9);
}

TEST(Zero, ASharedPartIsRoundedUpToAWholeShare) {
  const ModelStates full{.weights = 10, .gradients = 10, .optimizer = 10};
  const ModelStates s = zero_shard(full, 4, 3);
  EXPECT_EQ(s.weights, 3u);  // ceil(10 / 4): the last rank's share is padded
  EXPECT_EQ(zero_shard(full, 1, 3).total(), 30u);  // one rank shards nothing
}

TEST(Zero, StagesModelStatesAreMixedPrecisionAdamOfItsWeights) {
  // A bf16 GPT on one stage: Psi weights of 2 bytes, so 2 Psi + 2 Psi + 12 Psi.
  const StackShape g = parse_stack_shape("gpt:2:256:4:64:2:bf16:1000");
  const uint64_t psi = rank_model(g, {.blocks = 2}).param_bytes() / 2;
  for (int zero : {0, 1, 2, 3}) {
    SCOPED_TRACE(zero);
    ParallelSpec p;
    p.dp = 8;
    p.zero = zero;
    const ParallelReport r = simulate_parallel(g.spec, p, "store-all", {}, {});
    ASSERT_EQ(r.stages.size(), 1u);
    const StageReport& s = r.stages[0];
    auto share = [&](uint64_t b, int from) { return zero >= from ? (b + 7) / 8 : b; };
    EXPECT_EQ(s.optimizer, share(12 * psi, 1));
    EXPECT_EQ(s.gradients, share(2 * psi, 2));
    EXPECT_EQ(s.weights, share(2 * psi, 3));
  }
}
