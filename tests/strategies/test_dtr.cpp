// dtr:BYTES[:HEURISTIC] (core/strategies/dtr.h): the policy's schedule is
// valid, fits its budget, agrees with the simulator to the byte, and on hand-
// worked chains evicts what each heuristic says.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/dtr.h"
#include "core/strategies/registry.h"
#include "strategy_test_util.h"

using namespace remat;

namespace {

uint64_t peak_of(const Model& m, const std::string& spec) { return simulate(m, make_strategy(spec)->schedule(m)).peak_bytes; }

std::vector<int> evicted(const DtrPlay& p) {
  std::vector<int> out;
  for (const DtrEviction& e : p.evictions) out.push_back(e.storage);
  return out;
}

std::vector<Instr> compute_part(const Schedule& s) {
  std::vector<Instr> out;
  for (Instr i : s.code)
    if (i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd) out.push_back(i);
  return out;
}

}  // namespace

// With store-all's peak as the budget nothing is evicted: the schedule
// computes exactly what store-all computes, in the same order.
TEST(Dtr, AtStoreAllsPeakItIsStoreAll) {
  for (const char* preset : {"chain:12", "mlp:4", "transformer:1", "resnet:18:2:32:2:10", "gpt:1:32:2:16:2"}) {
    const Model m = make_preset(preset);
    const uint64_t store = peak_of(m, "store-all");
    const DtrPlay p = play_dtr(m, store, DtrHeuristic::HDtr);
    EXPECT_TRUE(p.evictions.empty()) << preset;
    EXPECT_EQ(compute_part(p.schedule), compute_part(make_strategy("store-all")->schedule(m))) << preset;
    EXPECT_EQ(simulate(m, p.schedule).peak_bytes, store) << preset;
  }
}

// The input is never evicted (recomputations start from it), so dtr holds it
// the whole step, where store-all frees it once no instruction reads it: a
// ReLU first (its backward reads its output only) drops x under store-all.
// With room for everything, dtr computes what store-all computes and peaks
// the input's bytes higher, as a captured batch_first GRU (whose first op
// transposes its input) does.
TEST(Dtr, HoldsTheInputWhereStoreAllFreesIt) {
  const Model m = test::mixed_chain({OpKind::ReLU, OpKind::Dense, OpKind::Dense, OpKind::Dense}, {64, 64, 64, 64});
  const Schedule store = make_strategy("store-all")->schedule(m);
  ASSERT_NE(std::find(store.code.begin(), store.code.end(), Instr{InstrKind::FreeAct, 0}), store.code.end());
  const DtrPlay p = play_dtr(m, UINT64_MAX, DtrHeuristic::HDtr);
  EXPECT_TRUE(p.evictions.empty());
  EXPECT_EQ(compute_part(p.schedule), compute_part(store));
  EXPECT_EQ(simulate(m, p.schedule).peak_bytes, simulate(m, store).peak_bytes + m.op(0).bytes);
}

// chain:6 (x, a1..a5 Dense tanh, loss; every tensor 1 byte; bwd ai reads
// A(a(i-1)) and A(ai); every op costs 3 FLOPs), worked by hand:
// - Store-all peaks at 8 (bwd a5 holds x, a1..a5, G(a5) and makes G(a4)).
// - Budget 7: bwd a5 needs one byte; a4 and a5 are locked, x stays, so a1,
//   a2 or a3 goes. All cost and weigh the same: the stalest (a1, last read by
//   fwd a2) for h-dtr and lru, the lowest id for largest; h-dtr-eq has no
//   evicted neighbour yet. bwd a2 recomputes a1 from x: one recomputation.
// - Budget 6: fwd loss already needs a byte (x, a1..a5 fill 6): a1 goes (a5
//   locked). At bwd a5 a2 or a3 must go: h-dtr, lru and largest take a2 (the
//   stalest, the lowest id); h-dtr-eq charges a2 its evicted neighbour a1
//   too (6 FLOPs against a3's 3, a 6:5 staleness ratio does not make up for
//   it) and takes a3. Either way two recomputations.
// - Budget 5: fwd a5 evicts a1, fwd loss a2, bwd a5 a3 (the only one left);
//   bwd a4 recomputes a1, a2, a3 and, to fit a3, evicts a1 (read by no op
//   still missing), then a2 for G(a3); bwd a3 recomputes a1, a2 and evicts
//   a1 for G(a2); bwd a2 recomputes a1: six recomputations.
// - Budget 4: bwd a5 needs x, a4, a5, G(a5) and G(a4): refused.
TEST(Dtr, HandWorkedUnitChain) {
  const Model m = make_preset("chain:6");
  ASSERT_EQ(peak_of(m, "store-all"), 8u);
  const std::string forward = "fwd a1 fwd a2 fwd a3 fwd a4 fwd a5 fwd loss bwd loss bwd a5 ";
  struct Case {
    uint64_t budget;
    DtrHeuristic h;
    std::vector<int> evicted;
    std::string compute;
  };
  const std::string six = forward + "bwd a4 fwd a1 fwd a2 bwd a3 bwd a2 bwd a1";
  const std::string five = forward.substr(0, forward.size() - 1) +
                           " fwd a1 fwd a2 fwd a3 bwd a4 fwd a1 fwd a2 bwd a3 fwd a1 bwd a2 bwd a1";
  const std::vector<Case> cases = {
      {7, DtrHeuristic::HDtr, {1}, forward + "bwd a4 bwd a3 fwd a1 bwd a2 bwd a1"},
      {7, DtrHeuristic::HDtrEq, {1}, forward + "bwd a4 bwd a3 fwd a1 bwd a2 bwd a1"},
      {7, DtrHeuristic::Lru, {1}, forward + "bwd a4 bwd a3 fwd a1 bwd a2 bwd a1"},
      {7, DtrHeuristic::Largest, {1}, forward + "bwd a4 bwd a3 fwd a1 bwd a2 bwd a1"},
      {6, DtrHeuristic::HDtr, {1, 2}, six},
      {6, DtrHeuristic::HDtrEq, {1, 3}, forward + "fwd a3 bwd a4 bwd a3 fwd a1 bwd a2 bwd a1"},
      {6, DtrHeuristic::Lru, {1, 2}, six},
      {6, DtrHeuristic::Largest, {1, 2}, six},
      {5, DtrHeuristic::HDtr, {1, 2, 3, 1, 2, 1}, five},
      {5, DtrHeuristic::Lru, {1, 2, 3, 1, 2, 1}, five},
      {5, DtrHeuristic::Largest, {1, 2, 3, 1, 2, 1}, five},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.budget) + " " + dtr_heuristic_names()[static_cast<std::size_t>(c.h)]);
    const DtrPlay p = play_dtr(m, c.budget, c.h);
    EXPECT_EQ(evicted(p), c.evicted);
    std::string compute;
    for (Instr i : compute_part(p.schedule)) compute += (compute.empty() ? "" : " ") + to_string(i, m);
    EXPECT_EQ(compute, c.compute);
    const Simulation s = simulate(m, p.schedule);
    EXPECT_EQ(s.peak_bytes, c.budget);
    EXPECT_EQ(s.peak_bytes, p.peak);
  }
  EXPECT_THROW(play_dtr(m, 4, DtrHeuristic::HDtr), InputError);
}

// The schedule says why each free happened, for the window's captions: each
// eviction's frees (the first at DtrEviction::instruction) are listed in
// Schedule::evictions, the recompute-all fallback's in fallback_frees, both
// ascending, disjoint, and nothing but frees.
void expect_free_causes(const DtrPlay& p) {
  const auto& code = p.schedule.code;
  const auto& ev = p.schedule.evictions;
  const auto& fb = p.schedule.fallback_frees;
  EXPECT_TRUE(std::is_sorted(ev.begin(), ev.end()) && std::adjacent_find(ev.begin(), ev.end()) == ev.end());
  EXPECT_TRUE(std::is_sorted(fb.begin(), fb.end()) && std::adjacent_find(fb.begin(), fb.end()) == fb.end());
  for (const auto* list : {&ev, &fb})
    for (std::size_t t : *list) {
      ASSERT_LT(t, code.size());
      EXPECT_TRUE(code[t].kind == InstrKind::FreeAct || code[t].kind == InstrKind::FreeAux) << t;
    }
  for (std::size_t t : ev) EXPECT_FALSE(std::binary_search(fb.begin(), fb.end(), t)) << t;
  EXPECT_GE(ev.size(), p.evictions.size());  // an evicted storage frees each resident alias
  for (const DtrEviction& e : p.evictions) {
    EXPECT_TRUE(std::binary_search(ev.begin(), ev.end(), e.instruction)) << e.instruction;
    EXPECT_EQ(code[e.instruction].kind, e.aux ? InstrKind::FreeAux : InstrKind::FreeAct);
    if (e.aux) EXPECT_EQ(code[e.instruction].op, e.storage);
  }
  if (p.fallbacks == 0) EXPECT_TRUE(fb.empty());
}

// Random DAGs, budgets from store-all's peak down to recompute-all's: every
// schedule validates, fits, and the policy's own count is the simulator's;
// none is refused (where the heuristic paints itself into a corner, the
// instruction is prepared recompute-all's way, which these budgets fit).
TEST(Dtr, RandomDagsFitTheirBudget) {
  std::size_t fallbacks = 0, fallback_frees = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    const Model m = seed % 2 ? test::random_dag(seed, 24) : test::mixed_width_dag(seed, 24);
    const uint64_t store = peak_of(m, "store-all");
    const uint64_t least = peak_of(m, "recompute-all");
    for (DtrHeuristic h : {DtrHeuristic::HDtr, DtrHeuristic::HDtrEq, DtrHeuristic::Lru, DtrHeuristic::Largest}) {
      for (int k = 0; k <= 10; ++k) {
        const uint64_t budget = least + (store - least) * static_cast<uint64_t>(k) / 10;
        SCOPED_TRACE(m.name + " budget " + std::to_string(budget) + " " +
                     dtr_heuristic_names()[static_cast<std::size_t>(h)]);
        try {
          const DtrPlay p = play_dtr(m, budget, h);
          const Simulation s = simulate(m, p.schedule);
          EXPECT_EQ(s.peak_bytes, p.peak);
          EXPECT_LE(s.peak_bytes, budget);
          EXPECT_EQ(s.backward_steps, static_cast<uint64_t>(m.size() - 1));
          fallbacks += p.fallbacks;
          fallback_frees += p.schedule.fallback_frees.size();
          expect_free_causes(p);
        } catch (const InputError& e) {
          ADD_FAILURE() << "refused at or above recompute-all's peak: " << e.what();
        }
      }
    }
  }
  EXPECT_GT(fallbacks, 0u);  // the fallback was exercised (about one play in thirty, when written)
  EXPECT_GT(fallback_frees, 0u);
}

TEST(Dtr, TooSmallABudgetSaysWhere) {
  const Model m = make_preset("chain:6");
  try {
    play_dtr(m, 4, DtrHeuristic::HDtr);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "dtr: a budget of 4 bytes is below what bwd a5 needs: 5 bytes (1 it makes, 1 of gradients, 3 of "
                 "activations it or the recomputation before it reads, the input's included; none can be evicted)");
  }
}

// The spec: the heuristic is a word, left out when it is the default.
TEST(Dtr, SpecRoundTrips) {
  EXPECT_EQ(parse_strategy("dtr:1K").str(), "dtr:1024");
  EXPECT_EQ(parse_strategy("dtr:1K:h-dtr").str(), "dtr:1024");
  EXPECT_EQ(parse_strategy("dtr:1K:lru").str(), "dtr:1024:lru");
  EXPECT_EQ(make_strategy("dtr:2048:h-dtr-eq")->name(), "dtr:2048:h-dtr-eq");
  try {
    parse_strategy("dtr:1K:fifo");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "dtr: HEURISTIC: unknown 'fifo' (known: h-dtr, h-dtr-eq, lru, largest)");
  }
  const Model m = make_preset("chain:10");
  const auto s = make_strategy("dtr:" + std::to_string(peak_of(m, "sqrt")));
  const ScheduleSize size = s->size(m, 1 << 20);
  EXPECT_EQ(size.bound, ScheduleSize::Bound::Exact);
  EXPECT_EQ(size.instructions, s->schedule(m).code.size());
  EXPECT_EQ(s->size(m, 5).bound, ScheduleSize::Bound::AtLeast);
}
