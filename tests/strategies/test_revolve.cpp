// Revolve against the known minimum, computed here two independent ways.
//
// Mapping to this project's counts on chain:N (ops 1..N after the input, op N
// the loss): textbook step i is op i, state x_i is A(i), and "reverse step i"
// is `fwd i; bwd i` (the forward fused with its backward). The simulator
// counts every fwd: each op's first fwd is a forward step, any later one a
// recompute. Revolve runs t advances plus N fused forwards, and every op is
// computed at least once, so forward_steps = t + N and recompute_steps = t.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "core/errors.h"
#include "core/presets.h"
#include "core/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"

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

TEST(Revolve, RecomputationIsTheMinimumOnChains) {
  for (int n : {1, 2, 3, 4, 5, 7, 10, 16, 21, 35, 50, 64, 100, 130}) {
    const Model m = make_preset("chain:" + std::to_string(n));
    for (int c : {1, 2, 3, 4, 5, 6, 8, 12, 20}) {
      const Simulation s = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
      const int64_t t = formula(n, c);
      EXPECT_EQ(s.recompute_steps, t) << "chain:" << n << " revolve:" << c;
      EXPECT_EQ(s.forward_steps, t + n) << "chain:" << n << " revolve:" << c;
      EXPECT_EQ(s.backward_steps, n);
    }
  }
}

TEST(Revolve, LargerCasesAgainstFormula) {
  for (auto [n, c] : std::vector<std::pair<int, int>>{{1000, 10}, {2000, 3}, {5000, 50}}) {
    const Model m = make_preset("chain:" + std::to_string(n));
    const Simulation s = simulate(m, make_strategy("revolve:" + std::to_string(c))->schedule(m));
    EXPECT_EQ(s.recompute_steps, formula(n, c)) << n << "," << c;
  }
}

TEST(Revolve, OneSlotIsRecomputeAllAndMoreSlotsNeverCostMore) {
  const Model m = make_preset("chain:20");
  EXPECT_EQ(simulate(m, make_strategy("revolve:1")->schedule(m)).forward_steps,
            simulate(m, make_strategy("recompute-all")->schedule(m)).forward_steps);
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
