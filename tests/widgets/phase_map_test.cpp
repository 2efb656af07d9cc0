// The phase axis shared by strategies, and the step numbering without frees.
#include <gtest/gtest.h>

#include <cmath>

#include "core/io/model_source.h"
#include "core/strategies/registry.h"
#include "widgets/document/phase_map.h"
#include "widgets/document/step_numbering.h"

using namespace remat;

TEST(PhaseMap, EveryStrategyHasTheSameEventsInOrder) {
  const Model m = load_model("chain:16");
  const int n = m.size();
  for (const char* spec : {"store-all", "recompute-all", "sqrt", "revolve:3"}) {
    SCOPED_TRACE(spec);
    const Schedule s = make_strategy(spec)->schedule(m);
    const PhaseMap p(m, s);
    ASSERT_EQ(p.events().size(), std::size_t(2 * (n - 1)));
    // The first n-1 events are the first fwd of ops 1..n-1 in order, then the
    // n-1 bwd from the loss down.
    for (int k = 0; k < n - 1; ++k) EXPECT_EQ(s.code[p.events()[std::size_t(k)]], (Instr{InstrKind::Fwd, k + 1}));
    for (int k = 0; k < n - 1; ++k)
      EXPECT_EQ(s.code[p.events()[std::size_t(n - 1 + k)]], (Instr{InstrKind::Bwd, n - 1 - k}));
    // stepAt inverts phaseAt at every step, and the phase never decreases.
    double last = -1;
    for (std::size_t t = 0; t < s.code.size(); ++t) {
      const double ph = p.phaseAt(t);
      EXPECT_GE(ph, last);
      last = ph;
      EXPECT_EQ(p.stepAt(ph), t);
    }
    // The k-th event is where phase k+1 is reached.
    for (std::size_t k = 0; k < p.events().size(); ++k) EXPECT_DOUBLE_EQ(p.phaseAt(p.events()[k]), double(k + 1));
  }
}

TEST(PhaseMap, SynchronisesStrategiesOfDifferentLengths) {
  const Model m = load_model("chain:16");
  const Schedule a = make_strategy("store-all")->schedule(m), b = make_strategy("recompute-all")->schedule(m);
  const PhaseMap pa(m, a), pb(m, b);
  ASSERT_NE(a.code.size(), b.code.size());
  // The bwd of a5 in store-all and in recompute-all happen at the same phase.
  std::size_t ia = 0, ib = 0;
  while (a.code[ia] != Instr{InstrKind::Bwd, 5}) ++ia;
  while (b.code[ib] != Instr{InstrKind::Bwd, 5}) ++ib;
  EXPECT_EQ(pb.stepAt(pa.phaseAt(ia)), ib);
  // Half way between two of store-all's events lies half way between the same
  // two of recompute-all's (its recomputations in between).
  const double mid = pa.phaseAt(ia) - 0.5;
  const std::size_t before = pb.events()[std::size_t(pa.phaseAt(ia)) - 2];
  EXPECT_EQ(pb.stepAt(mid), before + std::size_t(std::llround(0.5 * double(ib - before))));
}

TEST(StepNumbering, CountsAndMapsAcrossBlocks) {
  // More than one block of instructions, frees everywhere.
  const Model m = load_model("chain:200");
  const Schedule s = make_strategy("recompute-all")->schedule(m);
  ASSERT_GT(s.code.size(), 3 * StepNumbering::kBlock);
  const StepNumbering all(s, false), shown(s, true);
  EXPECT_EQ(all.count(), s.code.size());
  std::vector<std::size_t> compute;
  for (std::size_t i = 0; i < s.code.size(); ++i)
    if (s.code[i].kind == InstrKind::Fwd || s.code[i].kind == InstrKind::Bwd) compute.push_back(i);
  ASSERT_EQ(shown.count(), compute.size());
  for (std::size_t k = 0; k < compute.size(); ++k) {
    ASSERT_EQ(shown.instruction(k), compute[k]) << k;
    ASSERT_EQ(shown.rank(compute[k]), k) << k;
  }
  // A free snaps to the next compute instruction.
  for (std::size_t i = 0; i < s.code.size(); ++i) {
    const auto next = std::lower_bound(compute.begin(), compute.end(), i);
    ASSERT_EQ(shown.snap(i), next == compute.end() ? compute.back() : *next) << i;
  }
}
