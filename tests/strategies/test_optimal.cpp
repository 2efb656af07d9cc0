// optimal:BYTES is exhaustive on small graphs: no other strategy whose peak
// fits the same budget recomputes fewer FLOPs.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/presets.h"
#include "core/simulator.h"
#include "core/strategies/optimal.h"
#include "core/strategy.h"
#include "tests/strategies/strategy_test_util.h"

using namespace remat;

TEST(Optimal, NoStrategyBeatsItOnSmallGraphs) {
  for (const char* spec : {"chain:9", "mlp:3:16:4", "transformer:1:16:4:2"}) {
    const Model m = make_preset(spec);
    std::vector<Simulation> others;
    for (const char* s : {"store-all", "recompute-all", "sqrt", "every-k:2", "every-k:3", "auto", "selective", "revolve:2",
                          "revolve:3", "revolve:5"}) {
      try {
        others.push_back(simulate(m, make_strategy(s)->schedule(m)));
      } catch (const InputError&) {  // chain-only strategies on the transformer
      }
    }
    for (const auto& budget_from : others) {
      const uint64_t budget = budget_from.peak_bytes;
      const OptimalResult r = optimal_search(m, budget, 60);
      if (!r.found) continue;  // below every checkpoint set (recompute-all's own phases)
      EXPECT_TRUE(r.proven) << spec;
      const Simulation o = simulate(m, make_strategy("optimal:" + std::to_string(budget))->schedule(m));
      EXPECT_LE(o.peak_bytes, budget);
      for (const auto& s : others)
        if (s.peak_bytes <= budget) EXPECT_LE(o.recompute_flops, s.recompute_flops) << spec << " budget " << budget;
    }
  }
}

TEST(Optimal, AgreesWithBruteForce) {
  const Model m = test::unequal_chain({8, 64, 4, 32, 128, 16, 8, 40}, "u");
  const auto all = test::all_checkpoint_sets(m);
  for (const auto& r : all) {
    double best = 1e300;
    for (const auto& q : all)
      if (q.sim.peak_bytes <= r.sim.peak_bytes) best = std::min(best, q.sim.recompute_flops);
    const OptimalResult o = optimal_search(m, r.sim.peak_bytes, 60);
    ASSERT_TRUE(o.found);
    EXPECT_DOUBLE_EQ(o.recompute_flops, best);
  }
}

TEST(Optimal, InfeasibleSaysTheLeastPeak) {
  const Model m = make_preset("chain:8");
  EXPECT_THROW(make_strategy("optimal:1")->schedule(m), InputError);
}
