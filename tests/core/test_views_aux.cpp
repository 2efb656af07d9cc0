// Views and private saved tensors (aux) in the memory model: exact timelines
// on small graphs, derived by hand in the comments, and the validator's rules.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/support/model_builders.h"

using namespace remat;
using remat::testing::make_op;
using remat::testing::view_graph;

namespace {

// x [4,8] f32 (128 B) -> d = Dropout(x) (aux: a 32 B mask) -> l = Linear(d)
// (saves d) -> n = LayerNorm(l) (saves l; aux: mean and rstd, 4 rows x 8 B)
// -> MSE loss (saves n).
Model aux_graph() {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 8}));
  Op d = make_op(OpKind::Dropout, {0});
  d.dropout_p = 0.5f;
  m.add(std::move(d));
  m.add(make_op(OpKind::Linear, {1}, {4, 8}));
  m.add(make_op(OpKind::LayerNorm, {2}));
  m.add(make_op(OpKind::MSELoss, {3}));
  m.finalize();
  return m;
}

Simulation run(const Model& m, const char* spec, Schedule* out = nullptr) {
  Schedule s = make_strategy(spec)->schedule(m);
  Simulation sim = simulate(m, s);
  if (out) *out = s;
  return sim;
}

std::string error_of(const Model& m, const std::vector<Instr>& code) {
  try {
    validate(m, Schedule{"hand", code, ""});
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Views, OwnNothingAndShareTheirStorage) {
  const Model m = view_graph();
  EXPECT_TRUE(m.op(2).view);
  EXPECT_EQ(m.op(2).bytes, 0u);
  EXPECT_EQ(m.storage(2), 1);
  EXPECT_EQ(m.op(2).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(*m.op(2).strides, (std::vector<int64_t>{1, 2}));  // r's columns
  EXPECT_EQ(m.grad_bytes(2), 32u);                          // a view's gradient is its own tensor
  EXPECT_EQ(m.op(3).saved, (std::vector<int>{2, 1}));
  EXPECT_EQ(m.op(3).aux_bytes, 0u);  // 2-D mm reads a transposed view as it is
  // r's storage once, although two of its aliases are saved; m for the loss.
  EXPECT_EQ(m.saved_bytes(), 32u + 16u);
}

TEST(Views, StoreAllTimeline) {
  const Model m = view_graph();
  Schedule s;
  const Simulation sim = run(m, "store-all", &s);
  // F1 {x,r}=64, free x (ReLU saves its output) 32, F2 t is a view: 32,
  // F3 +m 48, F4 +loss 52, free loss 48, B4 +G3 64, free m 48,
  // B3 +G(t) 32 +G(r) 32 = 112, free G3 96, free t: r still holds the storage 96,
  // B2 (t's backward adds into G(r)) 96, free G(t) 64, B1 64, free G(r) 32, free r 0.
  const std::vector<uint64_t> expected = {64, 32, 32, 48, 52, 48, 64, 48, 112, 96, 96, 96, 64, 64, 32, 0};
  EXPECT_EQ(sim.timeline, expected);
  EXPECT_EQ(s.code[10], (Instr{InstrKind::FreeAct, 2}));
  EXPECT_EQ(sim.peak_bytes, 112u);
  EXPECT_EQ(sim.timeline[4 - 1], m.saved_bytes());  // after the forward of m, before the loss
}

TEST(Views, RecomputingAViewIsFree) {
  const Model m = view_graph();
  Schedule s;
  const Simulation none = run(m, "recompute-all", &s);
  std::vector<int> fwds(static_cast<std::size_t>(m.size()), 0);
  for (const Instr& ins : s.code)
    if (ins.kind == InstrKind::Fwd) ++fwds[static_cast<std::size_t>(ins.op)];
  ASSERT_GT(fwds[2], 1);  // the view is recomputed ...
  EXPECT_EQ(m.op(2).fwd_flops, 0.0);
  double expected = 0;  // ... and adds nothing to the recomputed FLOPs
  for (int v = 1; v < m.size(); ++v) expected += (fwds[static_cast<std::size_t>(v)] - 1) * m.op(v).fwd_flops;
  EXPECT_DOUBLE_EQ(none.recompute_flops, expected);
  EXPECT_EQ(none.recompute_steps, fwds[1] - 1 + fwds[2] - 1 + fwds[3] - 1 + fwds[4] - 1);
}

TEST(Views, RecomputeOfAStorageAViewStillHoldsIsRejected) {
  const Model m = view_graph();
  // F1 F2, free r (t holds its storage), then recompute r: a second copy.
  const std::string e = error_of(m, {{InstrKind::Fwd, 1}, {InstrKind::Fwd, 2}, {InstrKind::FreeAct, 1}, {InstrKind::Fwd, 1}});
  EXPECT_NE(e.find("instruction 3"), std::string::npos) << e;
  EXPECT_NE(e.find("a view of its previous value still holds that storage"), std::string::npos) << e;
}

TEST(Views, ACheckpointedViewKeepsItsOwner) {
  const Model m = view_graph();
  Schedule s;
  const Simulation sim = run(m, "manual:2", &s);  // checkpoint the view t: r is kept with it
  EXPECT_EQ(sim.recompute_steps, 0);
  const Simulation all = run(m, "store-all");
  EXPECT_EQ(sim.peak_bytes, all.peak_bytes);
}

TEST(Aux, SizesFromTheKinds) {
  const Model m = aux_graph();
  EXPECT_EQ(m.op(1).aux_bytes, 32u);     // one byte per element of the mask
  EXPECT_EQ(m.op(1).saved.size(), 0u);   // dropout's backward reads only the mask
  EXPECT_EQ(m.op(3).aux_bytes, 4u * 8);  // 4 rows x (mean, rstd) in f32
  EXPECT_EQ(m.op(3).bytes, 128u);        // y alone: the statistics are aux, not beside y
  EXPECT_EQ(m.op(3).saved, (std::vector<int>{2}));
  EXPECT_EQ(m.saved_bytes(), 128u * 3 + 32 + 32);  // d, l, n + both aux
}

TEST(Aux, StoreAllTimeline) {
  const Model m = aux_graph();
  Schedule s;
  const Simulation sim = run(m, "store-all", &s);
  // F1 x+d+mask 288, free x 160, F2 +l 288, F3 +n+stats 448, F4 +loss 452,
  // free loss 448, B4 +G3 576, free n 448, B3 +G2 576, free G3 448,
  // free stats 416, free l 288, B2 +G1 416, free G2 288, free d 160,
  // B1 (reads the mask) 160, free G1 32, free mask 0.
  const std::vector<uint64_t> expected = {288, 160, 288, 448, 452, 448, 576, 448, 576,
                                          448, 416, 288, 416, 288, 160, 160, 32, 0};
  EXPECT_EQ(sim.timeline, expected);
  EXPECT_EQ(s.code[10], (Instr{InstrKind::FreeAux, 3}));
  EXPECT_EQ(s.code.back(), (Instr{InstrKind::FreeAux, 1}));
  EXPECT_EQ(sim.timeline[3], m.saved_bytes());  // the forward pass done
}

TEST(Aux, ARecomputedSegmentMakesItsAuxAgain) {
  const Model m = aux_graph();
  Schedule s;
  const Simulation sim = run(m, "manual:2", &s);
  // Checkpoint l: phase [1,2] recomputes d (and with it the mask), the final
  // phase [3,4] reads the forward pass. The forward's mask is dropped at once.
  // F1 288, free mask 256, F2 +l 384, free d 256, F3 +n+stats 416, F4 420,
  // free loss 416, B4 +G3 544, free n 416, B3 +G2 544, free G3 416,
  // free stats 384, free l 256, F1 again +d+mask 416, free x 288,
  // B2 +G1 416, free G2 288, free d 160, B1 160, free G1 32, free mask 0.
  const std::vector<uint64_t> expected = {288, 256, 384, 256, 416, 420, 416, 544, 416, 544, 416,
                                          384, 256, 416, 288, 416, 288, 160, 160, 32, 0};
  EXPECT_EQ(sim.timeline, expected);
  EXPECT_EQ(s.code[1], (Instr{InstrKind::FreeAux, 1}));
  EXPECT_EQ(s.code[13], (Instr{InstrKind::Fwd, 1}));
  EXPECT_EQ(sim.recompute_steps, 1);
}

TEST(Aux, ACheckpointKeepsItsAuxFromTheForwardPass) {
  const Model m = aux_graph();
  // Checkpoint d: its mask stays until bwd d, nothing is recomputed, and the
  // program's memory is store-all's.
  const Simulation ck = run(m, "manual:1");
  const Simulation all = run(m, "store-all");
  EXPECT_EQ(ck.recompute_steps, 0);
  EXPECT_EQ(ck.timeline, all.timeline);
}

TEST(Aux, ValidatorNeedsAuxForTheBackward) {
  const Model m = aux_graph();
  // The forward pass, but the mask dropped before bwd d.
  std::vector<Instr> code = {{InstrKind::Fwd, 1}, {InstrKind::FreeAux, 1}, {InstrKind::Fwd, 2}, {InstrKind::Fwd, 3},
                             {InstrKind::Fwd, 4}, {InstrKind::Bwd, 4},     {InstrKind::Bwd, 3}, {InstrKind::Bwd, 2},
                             {InstrKind::Bwd, 1}};
  std::string e = error_of(m, code);
  EXPECT_NE(e.find("instruction 8"), std::string::npos) << e;
  EXPECT_NE(e.find("reads aux(Dropout1) which is not resident"), std::string::npos) << e;
  e = error_of(m, {{InstrKind::FreeAux, 2}});
  EXPECT_NE(e.find("free of aux"), std::string::npos) << e;
  // A recompute while the previous forward's aux is still held.
  e = error_of(m, {{InstrKind::Fwd, 1}, {InstrKind::FreeAct, 1}, {InstrKind::Fwd, 1}});
  EXPECT_NE(e.find("of its previous forward is resident"), std::string::npos) << e;
}

// saved_bytes is defined from the saved sets and aux; the store-all schedule
// must hold exactly that when the forward pass (the loss included) is done
// and its frees have run, just before the first backward step.
TEST(SavedBytes, EqualStoreAllsResidentBytesAfterTheForwardPass) {
  for (const char* spec : {"mlp:3:8:4", "transformer:2:16:4:2", "gpt:2:32:4:8:2:bf16:50", "resnet:10:8:32:2"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    Schedule s;
    const Simulation sim = run(m, "store-all", &s);
    std::size_t first_bwd = 0;
    while (s.code[first_bwd].kind != InstrKind::Bwd) ++first_bwd;
    EXPECT_EQ(sim.timeline[first_bwd - 1], m.saved_bytes());
  }
}
