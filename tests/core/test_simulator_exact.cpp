// Exact timelines for chain:4, derived by hand in the comments below (unit
// tensors, so bytes count tensors). Ops: a0 = input, a1..a3 Dense (backward
// reads input and output), a4 = MSE loss (backward reads its input; its own
// gradient is the implicit seed, no tensor).
#include <gtest/gtest.h>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {
Simulation run(const Model& m, const char* spec, Schedule* out = nullptr) {
  Schedule s = make_strategy(spec)->schedule(m);
  Simulation sim = simulate(m, s);
  if (out) *out = s;
  return sim;
}
}  // namespace

TEST(SimulatorExact, StoreAllChain4) {
  const Model m = make_preset("chain:4");
  Schedule s;
  const Simulation sim = run(m, "store-all", &s);
  // fwd1 {a0,a1}=2, fwd2 3, fwd3 4, fwd4 5, free a4 (never read) 4,
  // bwd4 +G3 5, bwd3 +G2 6, free G3 5, free a3 4, bwd2 +G1 5, free G2 4,
  // free a2 3, bwd1 (input has no gradient) 3, free G1 2, free a0 1, free a1 0.
  const std::vector<uint64_t> expected = {2, 3, 4, 5, 4, 5, 6, 5, 4, 5, 4, 3, 3, 2, 1, 0};
  EXPECT_EQ(sim.timeline, expected);
  EXPECT_EQ(sim.peak_bytes, 6u);
  EXPECT_EQ(sim.peak_index, 6u);
  EXPECT_EQ(sim.forward_steps, 4);
  EXPECT_EQ(sim.recompute_steps, 0);
  EXPECT_EQ(sim.backward_steps, 4);
  EXPECT_EQ(s.code[4], (Instr{InstrKind::FreeAct, 4}));
  EXPECT_EQ(s.code[7], (Instr{InstrKind::FreeGrad, 3}));
}

TEST(SimulatorExact, SqrtChain4CheckpointsA2) {
  const Model m = make_preset("chain:4");
  Schedule s;
  const Simulation sim = run(m, "sqrt", &s);
  // k = ceil(sqrt 4) = 2: checkpoint a2. Compute order:
  // F1 F2 F3 F4 | B4 B3 (last segment, from the forward pass) | F1 B2 B1.
  // a1 is freed after F2 (recomputed later), a4 at once.
  // F1 2, F2 3, free a1 2, F3 3, F4 4, free a4 3, B4 +G3 4, B3 +G2 5,
  // free G3 4, free a3 3, F1 4, B2 +G1 5, free G2 4, free a2 3, B1 3,
  // free G1 2, free a0 1, free a1 0.
  const std::vector<uint64_t> expected = {2, 3, 2, 3, 4, 3, 4, 5, 4, 3, 4, 5, 4, 3, 3, 2, 1, 0};
  EXPECT_EQ(sim.timeline, expected);
  EXPECT_EQ(sim.peak_bytes, 5u);
  EXPECT_EQ(sim.peak_index, 7u);
  EXPECT_EQ(sim.forward_steps, 5);
  EXPECT_EQ(sim.recompute_steps, 1);
  EXPECT_EQ(s.code[10], (Instr{InstrKind::Fwd, 1}));
}

TEST(SimulatorExact, RecomputeAllChain4) {
  const Model m = make_preset("chain:4");
  const Simulation sim = run(m, "recompute-all");
  // Compute order: F1 F2 F3 F4 B4 | F1 F2 F3 B3 | F1 F2 B2 | F1 B1: each
  // backward step recomputes from the input what it reads (a(i-1) and a(i)).
  // The largest set is at B3: {a0, G3, a2, a3} plus the new G2.
  EXPECT_EQ(sim.forward_steps, 4 + 3 + 2 + 1);  // forward pass + (3 + 2 + 1) recomputes
  EXPECT_EQ(sim.recompute_steps, 6);
  EXPECT_EQ(sim.backward_steps, 4);
  EXPECT_EQ(sim.peak_bytes, 5u);  // {a0, G3, a2, a3, G2} at B3
}

TEST(SimulatorExact, Chain16TableFromTheCli) {
  // The numbers `remat simulate --model chain:16` prints, derived in README.
  const Model m = make_preset("chain:16");
  const Simulation all = run(m, "store-all");
  const Simulation none = run(m, "recompute-all");
  const Simulation sq = run(m, "sqrt");
  EXPECT_EQ(all.peak_bytes, 18u);   // a0..a15 + G15 + G14 at bwd 15
  EXPECT_EQ(none.peak_bytes, 5u);   // a0, G(i), a(i-1), a(i), G(i-1)
  EXPECT_EQ(sq.peak_bytes, 9u);     // a0,a4,a8,a12 + a13,a14,a15 + G15,G14
  EXPECT_EQ(all.forward_steps, 16);
  EXPECT_EQ(none.forward_steps, 16 + 15 * 16 / 2);  // 136
  EXPECT_EQ(sq.forward_steps, 16 + 3 * 3);         // three segments recompute 3 ops each
}

TEST(SimulatorExact, OverheadIsRecomputedFlopsOverOnePass) {
  const Model m = make_preset("chain:16:64");
  const Simulation sq = run(m, "sqrt");
  // Nine recomputed Dense forwards of 16x16: 2*16*16 + 16 FLOPs each.
  const double dense_fwd = 2.0 * 16 * 16 + 16;
  EXPECT_DOUBLE_EQ(sq.recompute_flops, 9 * dense_fwd);
  EXPECT_DOUBLE_EQ(sq.overhead, 9 * dense_fwd / (m.forward_flops() + m.backward_flops()));
}
