// Revolve in this memory model, against the textbook count (computed here
// two independent ways) and against an exhaustive search over all schedules.
//
// Mapping on chain:N (ops 1..N-1 the layers, op N the loss): textbook step i
// is layer i, state x_i is A(i). A backward step reads A(i-1) and A(i); A(i)
// is still resident from bwd i+1, so the textbook's fused forward of step i is
// not re-run. What remains: the t(N-1, C) advances of the N-1 layer steps,
// the first forward of the last layer (the textbook's only fused step that
// computes something new) and the loss's forward: forward_steps =
// t(N-1, C) + 2. The peak: C slots, the held A(i) and G(i) while advancing
// (two working tensors), or A(i-1), A(i), G(i), G(i-1) at a backward step:
// C + 4 tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/strategies/exhaustive_chain.h"

using namespace remat;

namespace {

// binom(c + r, c) by Pascal's rule, no shortcuts shared with revolve.cpp.
int64_t beta_ref(int c, int r) {
  if (r < 0) return 0;
  std::vector<std::vector<int64_t>> p(static_cast<std::size_t>(c + r + 1));
  for (int i = 0; i <= c + r; ++i) {
    p[static_cast<std::size_t>(i)].assign(static_cast<std::size_t>(i + 1), 1);
    for (int j = 1; j < i; ++j)
      p[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] =
          p[static_cast<std::size_t>(i - 1)][static_cast<std::size_t>(j - 1)] + p[static_cast<std::size_t>(i - 1)][static_cast<std::size_t>(j)];
  }
  return p[static_cast<std::size_t>(c + r)][static_cast<std::size_t>(c)];
}

int64_t formula(int n, int c) {
  int r = 0;
  while (beta_ref(c, r) < n) ++r;
  return int64_t{r} * n - beta_ref(c + 1, r - 1);
}

// The recursion the formula solves: t(1,c) = 0, t(l,1) = l(l-1)/2,
// t(l,c) = min over m of m + t(l-m, c-1) + t(m, c).
std::vector<std::vector<int64_t>> recursion_table(int nmax, int cmax) {
  std::vector<std::vector<int64_t>> t(static_cast<std::size_t>(nmax + 1), std::vector<int64_t>(static_cast<std::size_t>(cmax + 1), 0));
  for (int l = 1; l <= nmax; ++l) {
    for (int c = 1; c <= cmax; ++c) {
      if (l == 1) t[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)] = 0;
      else if (c == 1) t[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)] = int64_t{l} * (l - 1) / 2;
      else {
        int64_t best = std::numeric_limits<int64_t>::max();
        for (int m = 1; m < l; ++m)
          best = std::min(best, m + t[static_cast<std::size_t>(l - m)][static_cast<std::size_t>(c - 1)] + t[static_cast<std::size_t>(m)][static_cast<std::size_t>(c)]);
        t[static_cast<std::size_t>(l)][static_cast<std::size_t>(c)] = best;
      }
    }
  }
  return t;
}

}  // namespace

TEST(Revolve, FormulaMatchesRecursion) {
  const auto t = recursion_table(60, 8);
  for (int n = 1; n <= 60; ++n)
    for (int c = 1; c <= 8; ++c) EXPECT_EQ(formula(n, c), t[static_cast<std::size_t>(n)][static_cast<std::size_t>(c)]) << n << "," << c;
}

namespace {
// forward_steps = t(N-1, C) + 2 for N >= 2 (see the top of this file).
int64_t expected_forward_steps(int n, int c) { return n == 1 ? 1 : formula(n - 1, c) + 2; }
}  // namespace

TEST(Revolve, ForwardStepsAreTheTextbookAdvancesPlusTwo) {
  for (int n : {1, 2, 3, 4, 5, 7, 10, 16, 21, 35, 50, 64, 100, 130}) {
    const Model m = make_preset("chain:" + std::to_string(n));
    for (int c : {1, 2, 3, 4, 5, 6, 8, 12, 20}) {
      const Simulation s = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
      EXPECT_EQ(s.forward_steps, expected_forward_steps(n, c)) << "chain:" << n << " revolve:" << c;
      EXPECT_EQ(s.recompute_steps, expected_forward_steps(n, c) - n) << "chain:" << n << " revolve:" << c;
      EXPECT_EQ(s.backward_steps, n);
      EXPECT_LE(s.peak_bytes, static_cast<uint64_t>(c + 4)) << "chain:" << n << " revolve:" << c;
    }
  }
}

// The example: on chain:10, revolve:3 peaks at 7 bytes like budget:7
// and needs no more forward steps than it.
TEST(Revolve, NotBeatenByTheBudgetSolverAtItsPeak) {
  const Model m = make_preset("chain:10");
  const Simulation r = simulate(m, make_strategy("revolve:3")->schedule(m));
  EXPECT_EQ(r.peak_bytes, 7u);
  EXPECT_EQ(r.forward_steps, formula(9, 3) + 2);
  const Simulation b = simulate(m, make_strategy("budget:7")->schedule(m));
  EXPECT_LE(b.peak_bytes, 7u);
  EXPECT_GE(b.forward_steps, r.forward_steps);
}

// The heart: no schedule at all, within revolve:C's peak (or within C + 4
// tensors, what C slots allow), needs fewer forward steps. Unit and 64-byte
// tensors.
TEST(Revolve, LeastForwardStepsOfAnyScheduleWithinItsPeak) {
  for (int bytes : {1, 64}) {
    for (int n = 1; n <= 11; ++n) {
      const Model m = make_preset("chain:" + std::to_string(n) + ":" + std::to_string(bytes));
      for (int c = 1; c <= 6; ++c) {
        const Simulation s = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
        const uint64_t slots_peak = static_cast<uint64_t>(c + 4) * static_cast<uint64_t>(bytes);
        ASSERT_LE(s.peak_bytes, slots_peak);
        EXPECT_EQ(static_cast<double>(s.forward_steps), test::least_chain_cost(m, s.peak_bytes, true))
            << "chain:" << n << ":" << bytes << " revolve:" << c << " at its peak " << s.peak_bytes;
        EXPECT_EQ(static_cast<double>(s.forward_steps), test::least_chain_cost(m, slots_peak, true))
            << "chain:" << n << ":" << bytes << " revolve:" << c << " at " << c + 4 << " tensors";
      }
    }
  }
}

// Every strategy the registry knows, at revolve:C's peak on a uniform chain:
// none that fits takes fewer forward steps.
TEST(Revolve, NoRegisteredStrategyBeatsItAtItsPeak) {
  const Model m = make_preset("chain:40");
  for (int c : {2, 3, 5, 7}) {
    const Simulation r = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
    std::vector<std::string> specs;
    for (const StrategyInfo& info : strategy_catalog()) {
      if (info.argument.empty()) specs.push_back(info.name);
    }
    for (int k = 2; k <= 10; ++k) specs.push_back("every-k:" + std::to_string(k));
    for (int k = 1; k <= 10; ++k) specs.push_back("revolve:" + std::to_string(k));
    specs.push_back("budget:" + std::to_string(r.peak_bytes));
    specs.push_back("optimal:" + std::to_string(r.peak_bytes) + ":2");
    int fitting = 0;
    for (const auto& spec : specs) {
      Simulation s;
      try {
        s = simulate(m, make_strategy(spec)->schedule(m));
      } catch (const InputError&) {  // nothing fits within the peak
        continue;
      }
      if (s.peak_bytes > r.peak_bytes) continue;
      ++fitting;
      EXPECT_GE(s.forward_steps, r.forward_steps) << spec << " beats revolve:" << c << " within " << r.peak_bytes;
    }
    EXPECT_GE(fitting, 3) << "revolve:" << c;
  }
}

TEST(Revolve, LargerCasesAgainstFormula) {
  for (auto [n, c] : std::vector<std::pair<int, int>>{{1000, 10}, {2000, 3}, {5000, 50}}) {
    const Model m = make_preset("chain:" + std::to_string(n));
    const Simulation s = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
    EXPECT_EQ(s.forward_steps, expected_forward_steps(n, c)) << n << "," << c;
  }
}

// One slot keeps only the input, like recompute-all, and is never worse
// than it at the same peak of 5 tensors: it holds A(i) instead of recomputing
// it, (N-1)(N-2)/2 + 2 forward steps against N(N+1)/2.
TEST(Revolve, OneSlotBeatsRecomputeAllAndMoreSlotsNeverCostMore) {
  const Model m = make_preset("chain:20");
  const Simulation one = simulate(m, make_strategy("revolve:1")->schedule(m));
  const Simulation all = simulate(m, make_strategy("recompute-all")->schedule(m));
  EXPECT_EQ(one.peak_bytes, all.peak_bytes);
  EXPECT_EQ(one.forward_steps, 19 * 18 / 2 + 2);
  EXPECT_EQ(all.forward_steps, 20 * 21 / 2);
  int64_t prev = std::numeric_limits<int64_t>::max();
  for (int c = 1; c <= 25; ++c) {
    const int64_t r = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m)).recompute_steps;
    EXPECT_LE(r, prev);
    prev = r;
  }
}

TEST(Revolve, RefusesDags) {
  const Model m = make_preset("transformer:1");
  try {
    make_strategy("revolve:4")->schedule(m);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("revolve needs a chain"), std::string::npos);
  }
  EXPECT_THROW(make_strategy("revolve:0"), InputError);
}
