// budget:BYTES against brute force over every checkpoint set of small chains
// with unequal layers.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "core/errors.h"
#include "core/presets.h"
#include "core/strategies/registry.h"
#include "tests/strategies/strategy_test_util.h"

using namespace remat;

namespace {

void check_against_brute_force(const Model& m) {
  const auto all = test::all_checkpoint_sets(m);
  std::set<uint64_t> budgets;
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (const auto& r : all) {
    budgets.insert(r.sim.peak_bytes);
    budgets.insert(r.sim.peak_bytes + 3);
    least = std::min(least, r.sim.peak_bytes);
  }
  for (uint64_t b : budgets) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& r : all)
      if (r.sim.peak_bytes <= b) best = std::min(best, r.sim.recompute_flops);
    const Simulation s = simulate(m, make_strategy("budget:" + std::to_string(b))->schedule(m));
    EXPECT_LE(s.peak_bytes, b) << m.name << " budget " << b;
    EXPECT_DOUBLE_EQ(s.recompute_flops, best) << m.name << " budget " << b;
  }
  try {
    make_strategy("budget:" + std::to_string(least - 1))->schedule(m);
    ADD_FAILURE() << "no error below the least peak";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("infeasible"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("smallest feasible budget is " + std::to_string(least) + " bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

TEST(Budget, OptimalOnUnequalChains) {
  check_against_brute_force(test::unequal_chain({8, 64, 4, 32, 128, 16, 8, 256, 12, 40}, "u1"));
  check_against_brute_force(test::unequal_chain({100, 3, 3, 90, 2, 2, 2, 80, 1, 70, 5, 60}, "u2"));
  check_against_brute_force(test::unequal_chain({16, 16, 16, 16, 16, 16, 16, 16, 16}, "equal"));
}

TEST(Budget, OptimalOnPresets) {
  check_against_brute_force(make_preset("chain:11"));
  check_against_brute_force(make_preset("mlp:5:32:4"));
}

TEST(Budget, RefusesDags) {
  EXPECT_THROW(make_strategy("budget:1M")->schedule(make_preset("transformer:1")), InputError);
}

// Beyond the exact regime the DP keeps fewer labels: its schedule must still
// fit, and beat the named strategies that fit the same budget.
TEST(Budget, LongChainsFitAndBeatSqrt) {
  std::vector<int64_t> widths;
  for (int i = 0; i < 400; ++i) widths.push_back(int64_t{4} << (i * 7 % 5));
  const Model m = test::unequal_chain(widths, "long");
  const Simulation sq = simulate(m, make_strategy("sqrt")->schedule(m));
  const Simulation b = simulate(m, make_strategy("budget:" + std::to_string(sq.peak_bytes))->schedule(m));
  EXPECT_LE(b.peak_bytes, sq.peak_bytes);
  EXPECT_LE(b.recompute_flops, sq.recompute_flops);
}
