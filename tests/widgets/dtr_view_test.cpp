// dtr in the window: a tensor it evicts and recomputes later is drawn as
// evicted (may come back), not freed; the caption says why it went; the
// legend lists the look only where it occurs.
#include <gtest/gtest.h>

#include <QImage>
#include <QPainter>
#include <algorithm>
#include <cmath>

#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/document/instruction_caption.h"
#include "widgets/document/node_states.h"
#include "widgets/views/graph_layout.h"
#include "widgets/views/graph_painter.h"
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

namespace {

bool among(const std::vector<std::size_t>& sorted, std::size_t t) {
  return std::binary_search(sorted.begin(), sorted.end(), t);
}

// Where dtr:272's heuristic paints itself into a corner (found among the
// random DAGs of test_dtr.cpp, written out): x feeds t1 -> t2 and n3 (they
// meet in s4) and t5 -> n6, which meets s4 in s7; the LayerNorms keep aux.
// 272 bytes is recompute-all's peak, store-all's 480.
Model corner_model() {
  Model m;
  m.name = "dtr-corner";
  auto add = [&](OpKind k, const char* name, std::vector<int> in) {
    Op op;
    op.kind = k;
    op.name = name;
    op.inputs = std::move(in);
    if (k == OpKind::Input) op.shape = {2, 8};
    m.add(op);
  };
  add(OpKind::Input, "x", {});
  add(OpKind::Tanh, "t1", {0});
  add(OpKind::Tanh, "t2", {1});
  add(OpKind::LayerNorm, "n3", {0});
  add(OpKind::Add, "s4", {2, 3});
  add(OpKind::Tanh, "t5", {0});
  add(OpKind::LayerNorm, "n6", {5});
  add(OpKind::Add, "s7", {6, 4});
  test::finish_with_mse_loss(m, 7);
  return m;
}

}  // namespace

// dtr's frees drawn as the caption words them: only the heuristic's
// evictions in the evicted look; what its recompute-all fallback frees (and
// A(n3), freed to remake its evicted aux) is freed, though it is recomputed
// later, as a checkpointing schedule's freed tensors are.
TEST(DtrView, OnlyTheHeuristicsEvictionsAreDrawnEvicted) {
  const Model m = corner_model();
  ASSERT_EQ(simulate(m, make_strategy("recompute-all")->schedule(m)).peak_bytes, 272u);
  const Schedule s = make_strategy("dtr:272")->schedule(m);
  const ResidentIndex index(m, s);
  const ScheduleFacts facts(m, s, {}, parse_strategy("dtr:272"));
  const InstructionCaption caption(m, s, facts);
  constexpr int t1 = 1, t2 = 2, n3 = 3, s4 = 4, t5 = 5, n6 = 6;
  auto look = [&](int v, std::size_t t) { return activation_look(node_states_at(m, s, index, facts, t), v); };

  // Evicted t2 at 7, recomputed at 13: evicted in between.
  ASSERT_EQ(s.code[7], (Instr{InstrKind::FreeAct, t2}));
  ASSERT_TRUE(among(s.evictions, 7));
  ASSERT_EQ(s.code[13], (Instr{InstrKind::Fwd, t2}));
  for (std::size_t t = 7; t < 13; ++t) EXPECT_EQ(look(t2, t), NodeLook::ActEvicted) << t;
  EXPECT_EQ(caption.text(7).rfind("evicting t2: memory was full", 0), 0u) << caption.text(7);

  // Evicted t1 at 14; then the heuristic finds nothing left to evict, and the
  // fallback frees t2 at 18 and n3 at 19, both recomputed (at 22 and 24).
  ASSERT_EQ(s.code[14], (Instr{InstrKind::FreeAct, t1}));
  ASSERT_TRUE(among(s.evictions, 14));
  ASSERT_EQ(s.code[18], (Instr{InstrKind::FreeAct, t2}));
  ASSERT_EQ(s.code[19], (Instr{InstrKind::FreeAct, n3}));
  ASSERT_TRUE(among(s.fallback_frees, 18) && among(s.fallback_frees, 19));
  ASSERT_EQ(s.code[22], (Instr{InstrKind::Fwd, t2}));
  ASSERT_EQ(s.code[24], (Instr{InstrKind::Fwd, n3}));
  for (std::size_t t = 18; t < 22; ++t) {
    EXPECT_EQ(node_states_at(m, s, index, facts, t).fwd[t2], FwdState::Freed) << t;
    EXPECT_EQ(look(t2, t), NodeLook::ActFreed) << t;
  }
  for (std::size_t t = 19; t < 24; ++t) EXPECT_EQ(look(n3, t), NodeLook::ActFreed) << t;
  EXPECT_EQ(caption.text(18), "freeing t2: the heuristic found nothing left to evict, so this step is prepared as "
                              "recompute-all prepares it; t2 is recomputed when it is read again");
  // A(n3) freed at 5 to remake aux(n3), recomputed at 16: freed, as captioned.
  ASSERT_EQ(s.code[5], (Instr{InstrKind::FreeAct, n3}));
  ASSERT_EQ(s.code[16], (Instr{InstrKind::Fwd, n3}));
  for (std::size_t t = 5; t < 16; ++t) EXPECT_EQ(look(n3, t), NodeLook::ActFreed) << t;
  EXPECT_EQ(caption.text(5), "freeing n3: aux(n3) was evicted, and recomputing n3 makes both again");

  // The picture at step 19: t1, s4 and t5 evicted (hatched on white), t2 and
  // n3 freed (pale), n6 in memory.
  const std::size_t step = 19;
  const NodeStates st = node_states_at(m, s, index, facts, step);
  const GraphLayout layout(m);
  QImage image(1000, 360, QImage::Format_RGB32);
  image.fill(Qt::white);
  GraphPaintReport report;
  {
    QPainter p(&image);
    const QRectF target(0, 0, 1000, 360);
    const GraphPaintOptions o;
    paint_graph(p, m, layout, st, fit_transform(layout, graph_area(target, o)), target, o, &report);
  }
  ASSERT_TRUE(report.detailed);
  std::vector<std::pair<NodeLook, QPointF>> circle(static_cast<std::size_t>(m.size()));
  std::size_t k = 0;
  for (int v = 0; v < m.size(); ++v) {  // forward then backward per op
    circle[static_cast<std::size_t>(v)] = report.nodes[k++];
    if (v != 0 && v != m.loss()) ++k;
  }
  ASSERT_EQ(k, report.nodes.size());
  const double r =
      std::abs(circle[1].second.x() - circle[0].second.x()) * GraphLayout::kRadius / GraphLayout::kDx;
  const QColor pale = node_style(NodeLook::ActFreed).fill;
  for (int v : {t1, s4, t5}) {
    EXPECT_EQ(circle[static_cast<std::size_t>(v)].first, NodeLook::ActEvicted) << v;
    // Its centre, and its body away from the centre: never the freed grey.
    for (QPointF at : {QPointF(0, 0), QPointF(-0.6 * r, 0.5 * r)})
      EXPECT_NE(image.pixelColor((circle[static_cast<std::size_t>(v)].second + at).toPoint()), pale) << v;
  }
  for (int v : {t2, n3}) {
    EXPECT_EQ(circle[static_cast<std::size_t>(v)].first, NodeLook::ActFreed) << v;
    EXPECT_EQ(image.pixelColor((circle[static_cast<std::size_t>(v)].second + QPointF(-0.6 * r, 0.5 * r)).toPoint()),
              pale)
        << v;
  }
  EXPECT_EQ(circle[static_cast<std::size_t>(n6)].first, NodeLook::ActResident);

  // The legend lists both looks, as the steps show them.
  const LegendMask mask = legend_mask(m, s, facts);
  EXPECT_NE(mask & legend_bit(NodeLook::ActEvicted), 0u);
  EXPECT_NE(mask & legend_bit(NodeLook::ActFreed), 0u);
  EXPECT_EQ(mask, legend_mask_by_steps(m, s, index, facts));
}

// On the random DAGs: at every free of an activation, the graph draws it
// evicted exactly where the caption says "evicting", and the legend agrees
// with the steps.
TEST(DtrView, TheLookAndTheCaptionAgreeAtEveryFree) {
  int evicted = 0, freedButRecomputed = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    const Model m = seed % 2 ? test::random_dag(seed, 24) : test::mixed_width_dag(seed, 24);
    const uint64_t least = simulate(m, make_strategy("recompute-all")->schedule(m)).peak_bytes;
    const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
    for (const char* h : {"h-dtr", "lru"})
      for (uint64_t k = 0; k <= 10; k += 2) {
        const std::string spec = "dtr:" + std::to_string(least + (store - least) * k / 10) + ":" + h;
        const Schedule s = make_strategy(spec)->schedule(m);
        const ResidentIndex index(m, s);
        const ScheduleFacts facts(m, s, {}, parse_strategy(spec));
        const InstructionCaption caption(m, s, facts);
        for (std::size_t t = 0; t < s.code.size(); ++t) {
          if (s.code[t].kind != InstrKind::FreeAct) continue;
          const int v = s.code[t].op;
          const bool says = caption.text(t).rfind("evicting ", 0) == 0;
          const NodeLook drawn = activation_look(node_states_at(m, s, index, facts, t), v);
          EXPECT_EQ(drawn == NodeLook::ActEvicted, says) << spec << " step " << t << ": " << caption.text(t);
          if (drawn != NodeLook::ActEvicted) EXPECT_EQ(drawn, NodeLook::ActFreed) << spec << " step " << t;
          evicted += says;
          freedButRecomputed += !says && caption.text(t).find("recomputed") != std::string::npos;
        }
        EXPECT_EQ(legend_mask(m, s, facts), legend_mask_by_steps(m, s, index, facts)) << spec;
      }
  }
  EXPECT_GT(evicted, 0);
  EXPECT_GT(freedButRecomputed, 0);  // frees that come back, drawn freed: the fallback's among them
}
