// The textbook table as properties over chain:N (unit tensors):
//   store-all     peak N+2 (linear), N forward steps
//   recompute-all peak 5 (constant), N + N(N-1)/2 forward steps (quadratic)
//   sqrt          peak O(sqrt N), under 2N forward steps
// Counts derived in the tests: a Dense backward reads its input and output, so
// the backward of a(i) needs a(i-1) and a(i) resident.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {
Simulation sim(int n, const char* spec) {
  const Model m = make_preset("chain:" + std::to_string(n));
  return simulate(m, make_strategy(spec)->schedule(m));
}
}  // namespace

TEST(SeedProperties, StoreAllIsLinear) {
  // chain:2's only Dense reads the input, which has no gradient: N+1 there.
  EXPECT_EQ(sim(2, "store-all").peak_bytes, 3u);
  for (int n : {3, 5, 16, 100, 1000}) {
    const Simulation s = sim(n, "store-all");
    // Peak at bwd of a(N-1): a0..a(N-1) (N tensors), G(N-1) and the new G(N-2).
    EXPECT_EQ(s.peak_bytes, static_cast<uint64_t>(n + 2)) << n;
    EXPECT_EQ(s.forward_steps, n);
    EXPECT_EQ(s.recompute_steps, 0);
    EXPECT_EQ(s.backward_steps, n);
  }
}

TEST(SeedProperties, RecomputeAllIsConstantMemoryQuadraticTime) {
  for (int n : {3, 4, 16, 100, 400}) {
    const Simulation s = sim(n, "recompute-all");
    EXPECT_EQ(s.peak_bytes, 5u) << n;
    // Backward of a(i), i = N-1..1, recomputes a1..a(i): sum i = N(N-1)/2.
    EXPECT_EQ(s.forward_steps, n + static_cast<int64_t>(n) * (n - 1) / 2) << n;
    EXPECT_EQ(s.recompute_steps, static_cast<int64_t>(n) * (n - 1) / 2) << n;
  }
}

TEST(SeedProperties, SqrtIsSqrtMemoryUnderTwoForwards) {
  for (int n : {4, 9, 16, 100, 1000, 10000}) {
    const Simulation s = sim(n, "sqrt");
    const int k = static_cast<int>(std::ceil(std::sqrt(n)));
    const int segments = (n - 1) / k + 1;  // checkpoints at k, 2k, ... < N
    EXPECT_LT(s.forward_steps, 2 * n) << n;
    // Every segment but the last recomputes its k-1 non-checkpoint ops.
    EXPECT_EQ(s.recompute_steps, static_cast<int64_t>(segments - 1) * (k - 1)) << n;
    // Checkpoints (input included) plus one segment with its gradients.
    EXPECT_LE(s.peak_bytes, static_cast<uint64_t>(segments + 1 + k + 2)) << n;
    EXPECT_LE(static_cast<double>(s.peak_bytes), 2.0 * std::sqrt(n) + 4) << n;
  }
  // Growth like sqrt N: 100x the length gives about 10x the peak.
  const double ratio = static_cast<double>(sim(10000, "sqrt").peak_bytes) / sim(100, "sqrt").peak_bytes;
  EXPECT_GT(ratio, 7.0);
  EXPECT_LT(ratio, 13.0);
}

TEST(SeedProperties, EveryKInterpolates) {
  // every-k:1 checkpoints everything: no recompute, the same peak as store-all.
  EXPECT_EQ(sim(32, "every-k:1").peak_bytes, sim(32, "store-all").peak_bytes);
  EXPECT_EQ(sim(32, "every-k:1").recompute_steps, 0);
  // every-k:K with K >= N has no checkpoint but the input: the whole chain is
  // the last segment, kept from the forward pass.
  EXPECT_EQ(sim(32, "every-k:64").peak_bytes, sim(32, "store-all").peak_bytes);
  // every-k:4 on chain:32: 8 segments, 7 recompute 3 ops each.
  EXPECT_EQ(sim(32, "every-k:4").recompute_steps, 21);
}

TEST(SeedProperties, ByteSizesScale) {
  const Model m = make_preset("chain:16:1024");
  const Simulation s = simulate(m, make_strategy("sqrt")->schedule(m));
  EXPECT_EQ(s.peak_bytes, 9u * 1024u);
}

TEST(SeedProperties, AllSeedsValidOnDags) {
  for (const char* model : {"mlp:6:16:4", "transformer:3:16:4:2"}) {
    const Model m = make_preset(model);
    uint64_t store_all = 0;
    for (const char* spec : {"store-all", "recompute-all", "sqrt", "every-k:3", "manual:5,9"}) {
      const Simulation s = simulate(m, make_strategy(spec)->schedule(m));  // throws if invalid
      EXPECT_EQ(s.backward_steps, m.size() - 1) << model << " " << spec;
      if (std::string(spec) == "store-all") store_all = s.peak_bytes;
      else EXPECT_LE(s.peak_bytes, store_all) << model << " " << spec;
    }
  }
}
