// sqrt and every-k cut the model as torch.utils.checkpoint does: a cut keeps
// what crosses it, so each segment recomputes only its own ops, once.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

// Index of the segment holding op v: segment j is (boundaries[j-1], boundaries[j]].
int segment_of(const std::vector<int>& boundaries, int v) {
  int j = 0;
  while (j < static_cast<int>(boundaries.size()) && boundaries[static_cast<std::size_t>(j)] < v) ++j;
  return j;
}

// How many times the schedule runs fwd v, for each v.
std::vector<int> fwd_counts(const Model& m, const Schedule& s) {
  std::vector<int> n(static_cast<std::size_t>(m.size()), 0);
  for (const Instr& i : s.code)
    if (i.kind == InstrKind::Fwd) ++n[static_cast<std::size_t>(i.op)];
  return n;
}

}  // namespace

// The definition, checked op by op: t is kept when some reader of t lies
// beyond a boundary at or after t.
TEST(Cuts, KeepExactlyWhatCrossesABoundary) {
  const Model m = make_preset("resnet:18:16:64:8:10");
  const std::vector<int> b = every_k_boundaries(m, sqrt_interval(m));
  ASSERT_EQ(sqrt_interval(m), 9);  // 70 ops after the input
  std::vector<int> expected;
  for (int t = 1; t < m.size(); ++t) {
    bool crosses = false;
    for (int c : b)
      for (int r : m.consumers(t)) crosses |= t <= c && r > c;
    if (crosses) expected.push_back(t);
  }
  EXPECT_EQ(cut_checkpoints(m, b), expected);
  // More than the boundaries: the residual skips cross some cuts.
  EXPECT_GT(expected.size(), b.size());
}

TEST(Cuts, OnAChainTheCutsAreTheBoundariesAndTheScheduleTheSegments) {
  const Model m = make_preset("chain:30");
  const std::vector<int> b = every_k_boundaries(m, 4);
  EXPECT_EQ(cut_checkpoints(m, b), b);
  EXPECT_EQ(cut_schedule(m, b, "x").code, segment_schedule(m, b, "x").code);
}

// Each recompute lies in the segment of the backward step it comes before,
// and no op runs more than twice (its forward and one recompute): the step
// PyTorch runs with each segment inside torch.utils.checkpoint.
TEST(Cuts, SqrtOnAResNetRecomputesEachSegmentOnceAndOnlyItsOwnOps) {
  const Model m = make_preset("resnet:18:16:64:8:10");
  const std::vector<int> b = every_k_boundaries(m, sqrt_interval(m));
  const Schedule s = make_strategy("sqrt")->schedule(m);
  const std::vector<int> runs = fwd_counts(m, s);
  for (int v = 1; v < m.size(); ++v) EXPECT_LE(runs[static_cast<std::size_t>(v)], 2) << m.op(v).name;

  bool backward = false;
  for (std::size_t i = 0; i < s.code.size(); ++i) {
    backward |= s.code[i].kind == InstrKind::Bwd;
    if (!backward || s.code[i].kind != InstrKind::Fwd) continue;
    std::size_t next = i;
    while (s.code[next].kind != InstrKind::Bwd) ++next;
    EXPECT_EQ(segment_of(b, s.code[i].op), segment_of(b, s.code[next].op))
        << "recompute " << m.op(s.code[i].op).name << " before bwd " << m.op(s.code[next].op).name;
  }
  const Simulation sim = simulate(m, s);
  int recomputed = 0;
  for (int v = 1; v < m.size(); ++v) recomputed += runs[static_cast<std::size_t>(v)] - 1;
  EXPECT_EQ(sim.recompute_steps, recomputed);
  EXPECT_LT(sim.recompute_steps, m.size() - 1);

  // Keeping only the boundary ops (manual's meaning) sends recomputes back
  // along the skips into earlier segments, some blocks several times: why the
  // cut keeps the crossing tensors.
  const std::vector<int> old_runs = fwd_counts(m, segment_schedule(m, b, "boundaries only"));
  int most = 0;
  for (int r : old_runs) most = std::max(most, r);
  EXPECT_GE(most, 3);
}
