// optimal:BYTES is an exact search over checkpoint sets: no other strategy
// whose peak fits the same budget recomputes fewer FLOPs, it matches brute
// force on DAGs and the exact chain DP beyond what brute force can reach.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/optimal.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"
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

namespace {
std::string error_of(const std::string& spec, const Model& m) {
  return remat::testing::input_error_of([&] { make_strategy(spec)->schedule(m); });
}
}  // namespace

TEST(Optimal, InfeasibleOnlyWhenProven) {
  // A Dense layer's backward alone holds its input, its output and its gradient:
  // a1's is the first of them.
  const std::string proven = error_of("optimal:2", make_preset("chain:8"));
  EXPECT_EQ(proven, "optimal: 2 bytes is infeasible for model 'chain:8': bwd a1 alone needs 3 bytes");
  // Out of time before any schedule fits (the MILP does not take 20,000 ops):
  // not called infeasible.
  const std::string timed_out = error_of("optimal:5:1", make_preset("chain:20000"));
  EXPECT_NE(timed_out.find("no schedule within 5 bytes was found for model 'chain:20000' in 1 s; the smallest peak seen is "),
            std::string::npos)
      << timed_out;
  EXPECT_EQ(timed_out.find("infeasible"), std::string::npos) << timed_out;
}

// A DAG (residual Adds): the branch and bound's pruning must never cut off the
// brute-force optimum, at every budget some set reaches exactly and just below it.
TEST(Optimal, MatchesBruteForceOnATransformerBlock) {
  const Model m = make_preset("transformer:1:16:4:2");
  ASSERT_EQ(m.loss() - 1, 14);  // candidate ops: 2^14 sets
  const auto all = test::all_checkpoint_sets(m);
  std::set<uint64_t> budgets;
  for (const auto& r : all) budgets.insert(r.sim.peak_bytes);
  ASSERT_GT(budgets.size(), 5u);
  int checked = 0;
  for (uint64_t b : budgets) {
    for (uint64_t budget : {b, b - 1}) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& r : all)
        if (r.sim.peak_bytes <= budget) best = std::min(best, r.sim.recompute_flops);
      const OptimalResult o = optimal_search(m, budget, 60);
      EXPECT_TRUE(o.proven) << "budget " << budget;
      EXPECT_LT(o.evaluated, static_cast<int64_t>(all.size())) << "budget " << budget << ": nothing pruned";
      if (best == std::numeric_limits<double>::infinity()) {
        EXPECT_FALSE(o.found) << "budget " << budget;
        continue;
      }
      ASSERT_TRUE(o.found) << "budget " << budget;
      EXPECT_LE(o.peak, budget);
      EXPECT_DOUBLE_EQ(o.recompute_flops, best) << "budget " << budget;
      ++checked;
    }
  }
  EXPECT_GT(checked, 5);
}

namespace {

// At every budget some checkpoint set reaches exactly, the search proves the
// least recompute FLOPs that brute force over all sets finds.
void expect_brute_force_optimum(const Model& m) {
  const auto all = test::all_checkpoint_sets(m);
  std::set<uint64_t> budgets;
  for (const auto& r : all) budgets.insert(r.sim.peak_bytes);
  for (uint64_t budget : budgets) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& r : all)
      if (r.sim.peak_bytes <= budget) best = std::min(best, r.sim.recompute_flops);
    const OptimalResult o = optimal_search(m, budget, 60);
    ASSERT_TRUE(o.found && o.proven) << m.name << " budget " << budget;
    EXPECT_DOUBLE_EQ(o.recompute_flops, best) << m.name << " budget " << budget;
  }
}

}  // namespace

// Irregular DAGs: skip edges of every length, cuts in odd places. (Seed 34
// fails when nodes are compared at c without all crossing tensors kept.)
TEST(Optimal, MatchesBruteForceOnRandomDags) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    const Model m = test::random_dag(seed, 11);
    ASSERT_LE(m.loss() - 1, 16) << m.name;
    expect_brute_force_optimum(m);
  }
}

// Beyond brute force (2^29 sets): on a chain the segment DP is exact over the
// same family, so the proven search must find the same FLOPs.
TEST(Optimal, ProvesTheChainDpOptimumBeyondBruteForce) {
  const Model m = test::unequal_chain({8, 64, 4, 32, 128, 16, 8, 256, 12, 40, 9, 77, 30, 5, 90, 14, 60,
                                       3, 45, 22, 70, 11, 33, 50, 7, 64, 18, 28, 96, 10},
                                      "u30");
  ASSERT_GT(m.loss() - 1, kSeedSearchAboveOps);
  const uint64_t least = chain_min_budget(m);
  const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
  for (uint64_t i = 0; i < 12; ++i) {
    const uint64_t budget = least + (store - 1 - least) * i / 11;
    std::vector<int> dp_set;
    double dp_flops = 0;
    ASSERT_TRUE(chain_budget_dp(m, budget, dp_set, nullptr, &dp_flops)) << budget;
    const OptimalResult o = optimal_search(m, budget, 60);
    ASSERT_TRUE(o.found) << budget;
    EXPECT_TRUE(o.proven) << budget;
    EXPECT_LE(o.peak, budget);
    EXPECT_DOUBLE_EQ(o.recompute_flops, dp_flops) << "budget " << budget;
  }
}

// With no time the search reports the best seed and does not claim a proof.
TEST(Optimal, OutOfTimeIsNotProven) {
  const Model m = make_preset("transformer:2:16:4:2");
  const uint64_t sqrt_peak = simulate(m, make_strategy("sqrt")->schedule(m)).peak_bytes;
  const OptimalResult o = optimal_search(m, sqrt_peak, 0);
  EXPECT_FALSE(o.proven);
  ASSERT_TRUE(o.found);  // sqrt itself is a seed (every-k)
  EXPECT_LE(o.peak, sqrt_peak);
}

// The schedule says when its search ran out of time, and only then.
TEST(Optimal, ScheduleNotesAnUnprovenResult) {
  const Model small = make_preset("transformer:1:16:4:2");
  const uint64_t small_sqrt = simulate(small, make_strategy("sqrt")->schedule(small)).peak_bytes;
  EXPECT_EQ(make_strategy("optimal:" + std::to_string(small_sqrt))->schedule(small).note, "");
  const Model big = make_preset("transformer:12:16:4:2");
  const uint64_t big_sqrt = simulate(big, make_strategy("sqrt")->schedule(big)).peak_bytes;
  const Schedule s = make_strategy("optimal:" + std::to_string(big_sqrt) + ":1")->schedule(big);
  // (The branch and bound's search or, where the residency bound's schedule
  // is chosen, the note on it, which names the search's limit too.)
  EXPECT_NE(s.note.find("its time limit (1 s)"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("not proven"), std::string::npos) << s.note;
}

// Seeds 619 and 1585 fail when nodes are compared without regard to which
// crossing tensors the settled phases read (such a tensor is held through the
// whole extension); the others are a sample of 2,856 that pass.
TEST(Optimal, MatchesBruteForceOnMixedWidthDags) {
  std::vector<unsigned> seeds{619, 1585};
  for (unsigned s = 1; s <= 20; ++s) seeds.push_back(s);
  int tested = 0;
  for (unsigned seed : seeds) {
    const Model m = test::mixed_width_dag(seed, 11);
    if (m.loss() - 1 > 16) continue;  // too many sets to brute-force
    ++tested;
    expect_brute_force_optimum(m);
  }
  EXPECT_GE(tested, 20);
}
