// dtr in the window: a tensor it evicts and recomputes later is drawn as
// evicted (may come back), not freed; the caption says why it went; the
// legend lists the look only where it occurs.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/document/node_states.h"
#include "widgets/views/legend_looks.h"
#include "widgets/views/node_style.h"
#include "tests/strategies/strategy_test_util.h"

using namespace remat;

namespace {

struct Played {
  Model model;
  Schedule schedule;
  ResidentIndex index;
  ScheduleFacts facts;
  Played(const char* preset, const std::string& spec)
      : model(load_model(preset)),
        schedule(make_strategy(spec)->schedule(model)),
        index(model, schedule),
        facts(model, schedule, {}, parse_strategy(spec)) {}
};

std::size_t find(const Schedule& s, Instr ins, std::size_t from = 0) {
  for (std::size_t i = from; i < s.code.size(); ++i)
    if (s.code[i] == ins) return i;
  return s.code.size();
}

}  // namespace

// chain:6 under dtr:6 (test_dtr.cpp works it by hand): a1 is evicted before
// fwd loss and recomputed before bwd a3; a5 is freed for good after bwd a5.
TEST(DtrView, EvictedIsNotFreed) {
  Played p("chain:6", "dtr:6");
  ASSERT_TRUE(p.facts.decides_live());
  const std::size_t evict = find(p.schedule, {InstrKind::FreeAct, 1});
  const std::size_t back = find(p.schedule, {InstrKind::Fwd, 1}, evict);
  ASSERT_LT(back, p.schedule.code.size());
  for (std::size_t t = evict; t < back; ++t) {
    const NodeStates s = node_states_at(p.model, p.schedule, p.index, p.facts, t);
    EXPECT_EQ(s.fwd[1], FwdState::Evicted) << t;
    EXPECT_EQ(activation_look(s, 1), NodeLook::ActEvicted);
  }
  EXPECT_EQ(node_states_at(p.model, p.schedule, p.index, p.facts, back).fwd[1], FwdState::Recomputing);
  const std::size_t gone = find(p.schedule, {InstrKind::FreeAct, 5});
  EXPECT_EQ(node_states_at(p.model, p.schedule, p.index, p.facts, gone).fwd[5], FwdState::Freed);

  const NodeStyle& st = node_style(NodeLook::ActEvicted);
  EXPECT_FALSE(st.filled);  // not in memory
  EXPECT_NE(st.outline, node_style(NodeLook::ActFreed).outline);
  EXPECT_STREQ(st.legend, "evicted (recomputed when read)");

  EXPECT_EQ(InstructionCaption(p.model, p.schedule, p.facts).text(evict),
            "evicting a1: memory was full, and it is the cheapest to recompute per byte and the stalest (h-dtr); "
            "it is recomputed when it is read again");
  EXPECT_NE(legend_mask(p.model, p.schedule, p.facts) & legend_bit(NodeLook::ActEvicted), 0u);
  EXPECT_EQ(legend_mask(p.model, p.schedule, p.facts), legend_mask_by_steps(p.model, p.schedule, p.index, p.facts));
}

TEST(DtrView, TheCaptionNamesTheHeuristic) {
  Played p("chain:6", "dtr:6:lru");
  const std::size_t evict = find(p.schedule, {InstrKind::FreeAct, 1});
  EXPECT_EQ(InstructionCaption(p.model, p.schedule, p.facts).text(evict),
            "evicting a1: memory was full, and it is the stalest, read longest ago (lru); it is recomputed when it is "
            "read again");
}

// Checkpointing strategies free what they recompute too, but decided that
// before the step: drawn freed, as before.
TEST(DtrView, OtherStrategiesStillFree) {
  Played p("chain:16", "sqrt");
  EXPECT_FALSE(p.facts.decides_live());
  const LegendMask mask = legend_mask(p.model, p.schedule, p.facts);
  EXPECT_EQ(mask & legend_bit(NodeLook::ActEvicted), 0u);
  EXPECT_NE(mask & legend_bit(NodeLook::ActFreed), 0u);
  EXPECT_EQ(legend_mask_by_steps(p.model, p.schedule, p.index, p.facts), mask);
}

// Where the heuristic finds nothing left to evict, dtr prepares the step as
// recompute-all does (dtr.cpp: strict_prepare); those frees are not the
// heuristic's choice, and the caption does not say they were.
TEST(DtrView, TheFallbacksFreesAreNotCaptionedAsEvictions) {
  int fallback_captions = 0, eviction_captions = 0;
  // The random DAGs test_dtr.cpp plays, budgets from recompute-all's peak up.
  for (unsigned seed = 1; seed <= 40 && fallback_captions == 0; ++seed) {
    const Model m = seed % 2 ? test::random_dag(seed, 24) : test::mixed_width_dag(seed, 24);
    const uint64_t least = simulate(m, make_strategy("recompute-all")->schedule(m)).peak_bytes;
    const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
    for (const char* h : {"h-dtr", "h-dtr-eq", "lru", "largest"})
      for (uint64_t k = 0; k <= 10; ++k) {
        const std::string spec = "dtr:" + std::to_string(least + (store - least) * k / 10) + ":" + h;
        const Schedule s = make_strategy(spec)->schedule(m);
        const ScheduleFacts facts(m, s, {}, parse_strategy(spec));
        const InstructionCaption caption(m, s, facts);
        for (std::size_t t = 0; t < s.code.size(); ++t) {
          if (s.code[t].kind != InstrKind::FreeAct) continue;
          const std::string text = caption.text(t);
          const bool evicted = std::binary_search(s.evictions.begin(), s.evictions.end(), t);
          const bool fallback = std::binary_search(s.fallback_frees.begin(), s.fallback_frees.end(), t);
          EXPECT_EQ(text.rfind("evicting ", 0) == 0, evicted) << spec << ": " << text;
          eviction_captions += evicted;
          if (!fallback || text.find("recomputed when it is read again") == std::string::npos) continue;
          EXPECT_NE(text.find("the heuristic found nothing left to evict, so this step is prepared as recompute-all "
                              "prepares it"),
                    std::string::npos)
              << text;
          ++fallback_captions;
        }
      }
  }
  EXPECT_GT(fallback_captions, 0);
  EXPECT_GT(eviction_captions, 0);
}
