// Issue 29: the structure of real networks (cuts, repeated blocks, attention
// cores) read from the graph, the attention-core and blocks baselines, and
// the block solver behind optimal: exhaustive search agrees with it on small
// repeated-block graphs, the MILP bounds it, and optimal is never above a
// baseline at the baseline's peak. Every schedule is replayed by the
// simulator (which rejects an invalid one) and its peak checked against the
// budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/block_solver.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/milp_schedule.h"
#include "core/strategies/optimal_schedule.h"
#include "core/strategies/registry.h"
#include "core/strategies/repeated_blocks.h"
#include "strategy_test_util.h"

namespace remat {
namespace {

uint64_t peak_of(const Model& m, const std::string& spec) { return simulate(m, make_strategy(spec)->schedule(m)).peak_bytes; }

// GPT-2's layer: ln_1 .. res2, found as one block of two cut segments (the
// attention's and the MLP's, each ending at a residual sum), repeated.
TEST(RepeatedBlocks, GptLayersAreTheRepeatedBlocks) {
  const Model m = make_preset("gpt:3:64:4:16:2:f32:100");
  std::vector<Block> layers;
  for (const Block& b : block_chain(m))
    if (b.first < b.last) layers.push_back(b);
  ASSERT_EQ(layers.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Block& b = layers[static_cast<std::size_t>(i)];
    const std::string p = "h" + std::to_string(i) + ".";
    EXPECT_EQ(m.op(b.first).name, p + "ln_1");
    EXPECT_EQ(m.op(b.last).name, p + "res2");
    EXPECT_TRUE(b.repeated);
    EXPECT_EQ(b.shape, layers[0].shape);
  }
  // Every other block is a single op (embedding, dropout, head).
  for (const Block& b : block_chain(m))
    if (b.first == b.last) EXPECT_FALSE(b.repeated) << m.op(b.first).name;
}

// ResNet-50's bottlenecks: 16 blocks of more than one op; within each stage all
// but the first (its shortcut convolves) are one repeated shape.
TEST(RepeatedBlocks, ResNetBottlenecksAreBlocks) {
  const Model m = make_preset("resnet:50:8:32:2:10");
  int multi = 0, repeated = 0;
  for (const Block& b : block_chain(m)) {
    if (b.first == b.last) continue;
    ++multi;
    repeated += b.repeated;
  }
  EXPECT_EQ(multi, 16);
  EXPECT_EQ(repeated, 2 + 3 + 5 + 2);
}

// The cores: q@kT, scale, mask, softmax, attention dropout, in each layer.
TEST(RepeatedBlocks, AttentionCoresAreFoundInEachLayer) {
  const Model m = make_preset("gpt:2:64:4:16:1:f32:100");
  const auto cores = attention_cores(m);
  ASSERT_EQ(cores.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<std::string> names;
    for (int v : cores[i]) names.push_back(m.op(v).name);
    const std::string p = "h" + std::to_string(i) + ".attn.";
    EXPECT_EQ(names, (std::vector<std::string>{p + "q@kT", p + "scale", p + "mask", p + "softmax", p + "attn_dropout"}));
  }
  EXPECT_TRUE(attention_cores(make_preset("transformer:2")).empty());
  // Without the structure, everything is kept and the note says why.
  const Model resnet = make_preset("resnet:18");
  const Schedule none = make_strategy("attention-core")->schedule(resnet);
  EXPECT_EQ(none.note.rfind("model 'resnet:18' has no attention core", 0), 0u) << none.note;
  EXPECT_EQ(simulate(resnet, none).recompute_steps, 0);
  EXPECT_EQ(simulate(resnet, none).peak_bytes, peak_of(resnet, "store-all"));
  const Model chain = make_preset("chain:8");
  const Schedule flat = make_strategy("blocks")->schedule(chain);
  EXPECT_EQ(flat.note.rfind("model 'chain:8' has no block of more than one op", 0), 0u) << flat.note;
  EXPECT_EQ(simulate(chain, flat).recompute_steps, 0);
  EXPECT_EQ(make_strategy("blocks")->schedule(make_preset("gpt:2:64:4:16:1:f32:100")).note, "");
}

// attention-core recomputes each core op exactly once, nothing else: its
// recompute FLOPs are the cores' forward FLOPs.
TEST(Baselines, AttentionCoreRecomputesEachCoreOnce) {
  for (const char* spec : {"gpt:2:64:4:16:1:f32:100", "gpt:4"}) {
    const Model m = make_preset(spec);
    double core_flops = 0;
    for (const auto& c : attention_cores(m))
      for (int v : c) core_flops += m.op(v).fwd_flops;
    const Schedule s = make_strategy("attention-core")->schedule(m);
    const Simulation sim = simulate(m, s);
    EXPECT_EQ(sim.recompute_flops, core_flops) << spec;
    EXPECT_EQ(sim.recompute_steps, 5 * static_cast<int64_t>(attention_cores(m).size())) << spec;
    EXPECT_LT(sim.peak_bytes, peak_of(m, "store-all")) << spec;
    // attention-core:1 recomputes the first core only.
    const Simulation one = simulate(m, make_strategy("attention-core:1")->schedule(m));
    EXPECT_EQ(one.recompute_steps, 5) << spec;
  }
}

// blocks recomputes only ops inside blocks, each at most once, and peaks
// below store-all; blocks:2 keeps every other block's output only (its peak
// may be higher: two blocks are recomputed at once).
TEST(Baselines, BlocksRecomputeInsideBlocksOnly) {
  for (const char* spec : {"gpt:4:64:4:16:1:f32:100", "resnet:18", "transformer:4"}) {
    const Model m = make_preset(spec);
    std::vector<char> inside(static_cast<std::size_t>(m.size()), 0);
    for (const Block& b : block_chain(m))
      for (int v = b.first; v < b.last; ++v) inside[static_cast<std::size_t>(v)] = 1;
    const Schedule s = make_strategy("blocks")->schedule(m);
    std::vector<int> fwd(static_cast<std::size_t>(m.size()), 0);
    for (const Instr& i : s.code)
      if (i.kind == InstrKind::Fwd) ++fwd[static_cast<std::size_t>(i.op)];
    for (int v = 1; v < m.size(); ++v) {
      EXPECT_LE(fwd[static_cast<std::size_t>(v)], inside[static_cast<std::size_t>(v)] ? 2 : 1) << spec << " op " << v;
    }
    const Simulation sim = simulate(m, s);
    EXPECT_GT(sim.recompute_steps, 0) << spec;
    EXPECT_LT(sim.peak_bytes, peak_of(m, "store-all")) << spec;
    const std::vector<int> one = block_input_checkpoints(m), two = block_input_checkpoints(m, 2);
    EXPECT_LT(two.size(), one.size()) << spec;
    EXPECT_TRUE(std::includes(one.begin(), one.end(), two.begin(), two.end())) << spec;
  }
}

// The family the block solver searches, by brute force: every choice, in
// every block, of which storages inside it are kept (views with their
// storage), the rest of the model kept. The least recompute FLOPs within the
// budget, or -1.
double exhaustive_block_sets(const Model& m, uint64_t budget) {
  std::vector<int> fixed, free;
  std::vector<char> inside(static_cast<std::size_t>(m.size()), 0);
  for (const Block& b : block_chain(m)) {
    if (b.first == b.last) continue;
    for (int v = b.first; v < b.last; ++v) {
      inside[static_cast<std::size_t>(v)] = 1;
      if (!m.op(v).view) free.push_back(v);
    }
  }
  for (int v = 1; v < m.loss(); ++v)
    if (!inside[static_cast<std::size_t>(v)]) fixed.push_back(v);
  EXPECT_LE(free.size(), 16u);
  double best = -1;
  for (uint32_t mask = 0; mask < (1u << free.size()); ++mask) {
    std::vector<char> kept(static_cast<std::size_t>(m.size()), 0);
    for (int v : fixed) kept[static_cast<std::size_t>(v)] = 1;
    for (std::size_t i = 0; i < free.size(); ++i)
      if (mask >> i & 1u) kept[static_cast<std::size_t>(free[i])] = 1;
    std::vector<int> ckpt;
    for (int v = 1; v < m.loss(); ++v)
      if (kept[static_cast<std::size_t>(v)] || (m.op(v).view && kept[static_cast<std::size_t>(m.storage(v))])) ckpt.push_back(v);
    const Simulation s = simulate(m, segment_schedule(m, ckpt, "brute"), {.timeline = false});
    if (s.peak_bytes <= budget && (best < 0 || s.recompute_flops < best)) best = s.recompute_flops;
  }
  return best;
}

// On random blocks repeated 2-4 times, at budgets from store-all's peak down
// to below blocks', the block solver finds the least FLOPs of its family, or
// says nothing fits when nothing does; its set's schedule fits the budget.
TEST(BlockSolver, EqualsExhaustiveSearchOnRandomRepeatedBlocks) {
  int cases = 0, feasible = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    const int repeats = 2 + static_cast<int>(seed % 3);
    const int ops = repeats == 4 ? 3 : repeats == 3 ? 4 : 5;
    const Model m = test::repeated_random_blocks(seed, repeats, ops);
    int free = 0;
    for (const Block& b : block_chain(m))
      for (int v = b.first; v < b.last; ++v) free += !m.op(v).view;
    if (free > 16) continue;
    const uint64_t hi = peak_of(m, "store-all"), lo = least_possible_peak(m);
    for (int i = 0; i <= 6; ++i) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(i) / 6;
      const double want = exhaustive_block_sets(m, budget);
      const BlockSolution got = block_solve(m, budget, 30);
      ++cases;
      ASSERT_EQ(got.found, want >= 0) << m.name << " budget " << budget;
      if (!got.found) continue;
      ++feasible;
      EXPECT_TRUE(got.complete);
      EXPECT_EQ(got.recompute_flops, want) << m.name << " budget " << budget;
      const Simulation s = simulate(m, segment_schedule(m, got.checkpoints, "blocks"));
      EXPECT_LE(s.peak_bytes, budget);
      EXPECT_EQ(s.recompute_flops, got.recompute_flops);
      EXPECT_EQ(s.peak_bytes, got.peak);
    }
  }
  EXPECT_GE(cases, 60);
  EXPECT_GE(feasible, 30);
}

// The MILP searches general schedules, a wider family (a tensor recomputed
// in some phases and kept in others): where it proves its answer, it is never
// above the block solver's, and equal to it on some budgets.
TEST(BlockSolver, MilpIsNeverAboveItWhereItFinishes) {
  if (milp_solver_name().empty()) GTEST_SKIP() << "this build has no MILP solver";
  int compared = 0, equal = 0;
  for (unsigned seed = 1; seed <= 4; ++seed) {
    const Model m = test::repeated_random_blocks(seed, 2, 3);
    const uint64_t hi = peak_of(m, "store-all"), lo = least_possible_peak(m);
    for (int i = 1; i <= 5; ++i) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(i) / 6;
      const BlockSolution b = block_solve(m, budget, 30);
      const MilpResult milp = solve_milp(m, budget, 10);
      if (!b.found || milp.status != MilpResult::Status::Optimal) continue;
      ++compared;
      EXPECT_LE(milp.recompute_flops, b.recompute_flops * (1 + 1e-12)) << m.name << " budget " << budget;
      equal += meets_bound(b.recompute_flops, milp.recompute_flops);
    }
  }
  EXPECT_GE(compared, 5);
  EXPECT_GE(equal, 1) << equal << " of " << compared;
  std::printf("the MILP's proven least equals the block solver's on %d of %d budgets\n", equal, compared);
}

// optimal at a baseline's peak recomputes no more than the baseline, on small
// GPT and ResNet presets.
TEST(BlockSolver, OptimalIsNeverAboveABaselineAtItsPeak) {
  for (const char* spec : {"gpt:2:64:4:32:2:f32:100", "resnet:18"}) {
    const Model m = make_preset(spec);
    for (const char* base : {"attention-core", "blocks", "sqrt", "selective"}) {
      const Schedule bs = make_strategy(base)->schedule(m);
      if (!bs.note.empty()) continue;  // no attention in a ResNet
      const Simulation b = simulate(m, bs);
      const Schedule os = make_strategy("optimal:" + std::to_string(b.peak_bytes) + ":1")->schedule(m);
      const Simulation o = simulate(m, os);
      EXPECT_LE(o.peak_bytes, b.peak_bytes) << spec << " at " << base << "'s peak";
      EXPECT_LE(o.recompute_flops, b.recompute_flops) << spec << " at " << base << "'s peak";
    }
  }
}

}  // namespace
}  // namespace remat
