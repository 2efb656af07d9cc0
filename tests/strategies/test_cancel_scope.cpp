// A CancelScope stops the optimal search where its deadline would: the window
// cancels a search it no longer needs without waiting for its time limit.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "core/base/cancel_scope.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "core/strategies/optimal.h"

namespace remat {
namespace {

TEST(CancelScope, ScopesNestAndStayOnTheirThread) {
  std::atomic<bool> set{true}, clear{false};
  EXPECT_FALSE(cancel_requested());
  {
    CancelScope outer(&set);
    EXPECT_TRUE(cancel_requested());
    {
      CancelScope inner(&clear);
      EXPECT_FALSE(cancel_requested());
    }
    EXPECT_TRUE(cancel_requested());
    bool other = true;
    std::thread([&] { other = cancel_requested(); }).join();
    EXPECT_FALSE(other);  // another thread has no scope
  }
  EXPECT_FALSE(cancel_requested());
}

TEST(CancelScope, StopsTheOptimalSearchLongBeforeItsLimit) {
  const Model m = make_preset("transformer:12:16:4:2");
  // A day's limit: without the cancel this test would time out.
  std::atomic<bool> cancel{true};
  CancelScope scope(&cancel);
  const OptimalResult r = optimal_search(m, 18176, 86400);
  EXPECT_FALSE(r.proven);
  // Only the fixed seeds (empty set, auto, selective, articulation points) and
  // the local search's starting set are evaluated: fewer than the ops.
  EXPECT_LT(r.evaluated, 10);
}

TEST(CancelScope, AnUnsetFlagChangesNothing) {
  const Model m = make_preset("chain:8");
  const uint64_t budget = simulate(m, make_strategy("sqrt")->schedule(m)).peak_bytes;
  std::atomic<bool> cancel{false};
  CancelScope scope(&cancel);
  const OptimalResult r = optimal_search(m, budget, 30);
  EXPECT_TRUE(r.proven);
  EXPECT_TRUE(r.found);
  EXPECT_LE(r.peak, budget);
}

}  // namespace
}  // namespace remat
