// Compressed checkpoints in the window: a node held only as its compressed
// copy C(v) is drawn as "compressed" (its own look, in the legend), never as
// freed, from the `free A(v)` after its compress until its decompress; the
// tooltip and the caption name the type and the stored bytes.
#include <QImage>
#include <QTest>
#include <algorithm>
#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "widgets/views/graph_layout.h"
#include "widgets/views/graph_view.h"
#include "widgets/document/node_states.h"
#include "widgets/views/node_style.h"
#include "widgets/document/studio_document.h"
#include "tests/widgets/schedule_case.h"

using namespace remat;

namespace {
// chain:7:64: x (op 0), a1..a6, the loss (op 7), 64 bytes (16 floats) each.
// sqrt checkpoints x and a3 (ceil(sqrt 7) = 3); the modifier compresses the
// checkpoints whose first backward read is a recompute: x (read first by the
// recompute of a1) and a3 (by that of a4), not a6 (bwd loss reads it at once)
// (docs/strategies.md). Each is compressed right after its last forward read
// (x after fwd a1, a3 after fwd a4), its A freed at once, and decompressed
// right before that recompute. So x is held only compressed from `free A(x)`
// until `decompress A(x)`, a3 likewise, and no other op ever is.
struct Chain7 : ScheduleCase {
  Chain7() : ScheduleCase("chain:7:64", "sqrt+compress:bf16") {}
};

std::vector<int> compressedOps(const NodeStates& s) {
  std::vector<int> out;
  for (std::size_t v = 0; v < s.fwd.size(); ++v)
    if (s.fwd[v] == FwdState::Compressed) out.push_back(int(v));
  return out;
}
}  // namespace

TEST(CompressedView, Chain7SqrtBf16CompressedNodesAtEveryStep) {
  Chain7 c;
  const std::size_t n = c.schedule.code.size();
  // Where the rule above puts the conversions.
  const std::size_t compX = c.first({InstrKind::CompressBF16, 0}), compA3 = c.first({InstrKind::CompressBF16, 3});
  ASSERT_LT(compX, n);
  ASSERT_LT(compA3, n);
  EXPECT_EQ(c.schedule.code[compX - 1], (Instr{InstrKind::Fwd, 1}));
  EXPECT_EQ(c.schedule.code[compA3 - 1], (Instr{InstrKind::Fwd, 4}));
  EXPECT_EQ(c.first({InstrKind::CompressBF16, 6}), n);  // a6 is not compressed
  const std::size_t freeX = compX + 1, freeA3 = compA3 + 1;
  EXPECT_EQ(c.schedule.code[freeX], (Instr{InstrKind::FreeAct, 0}));
  EXPECT_EQ(c.schedule.code[freeA3], (Instr{InstrKind::FreeAct, 3}));
  const std::size_t decX = c.first({InstrKind::Decompress, 0}), decA3 = c.first({InstrKind::Decompress, 3});
  ASSERT_LT(decX, n);
  ASSERT_LT(decA3, n);
  // Decompressed, C freed, then the recompute that reads it.
  EXPECT_EQ(c.schedule.code[decX + 2], (Instr{InstrKind::Fwd, 1}));
  EXPECT_EQ(c.schedule.code[decA3 + 2], (Instr{InstrKind::Fwd, 4}));

  int compressedSteps = 0;
  for (std::size_t t = 0; t < n; ++t) {
    std::vector<int> want;
    if (freeX <= t && t < decX) want.push_back(0);
    if (freeA3 <= t && t < decA3) want.push_back(3);
    const NodeStates s = c.states(t);
    EXPECT_EQ(compressedOps(s), want) << "step " << t;
    for (int v : want) {
      EXPECT_EQ(s.packing[std::size_t(v)], Packing::BF16) << "step " << t;
      EXPECT_EQ(activation_look(s, v), NodeLook::ActCompressed) << "step " << t;
    }
    for (int v = 0; v < c.model.size(); ++v)
      if (std::find(want.begin(), want.end(), v) == want.end())
        EXPECT_EQ(s.packing[std::size_t(v)], Packing::None) << "step " << t << " op " << v;
    compressedSteps += int(want.size());
  }
  // Both intervals are real (the forward and backward passes in between).
  EXPECT_EQ(compressedSteps, int(decX - freeX + decA3 - freeA3));
  EXPECT_GT(decA3, freeA3 + 5);
  // At its compress the tensor is still whole beside its copy: live, as at its decompress.
  EXPECT_EQ(c.states(compX).fwd[0], FwdState::Live);
  EXPECT_EQ(c.states(decX).fwd[0], FwdState::Live);
  // The resident index now names C(v): a3's copy at the end of the forward pass.
  const auto resident = c.index.resident_at(decA3 - 1);
  EXPECT_NE(std::find(resident.begin(), resident.end(), TensorRef{3, false, false, true}), resident.end());
  EXPECT_EQ(std::find(resident.begin(), resident.end(), TensorRef{3, false}), resident.end());
}

TEST(CompressedView, CompressedBytesAtEveryStepAreTheTimelinesRest) {
  // What the graph shows as compressed plus what it shows live and as
  // gradients is, at every step of a larger case, the simulator's device bytes.
  const Model m = load_model("chain:30:16");
  for (const char* spec : {"sqrt+compress:int8", "every-k:3+compress:f16"}) {
    const Schedule s = make_strategy(spec)->schedule(m);
    const Simulation sim = simulate(m, s);
    ASSERT_GT(sim.conversions, 0) << spec;
    const ResidentIndex index(m, s);
    const ScheduleFacts facts(m, s);
    int seen = 0;
    for (std::size_t t = 0; t < s.code.size(); ++t) {
      const NodeStates st = node_states_at(m, s, index, facts, t);
      uint64_t bytes = 0;
      for (int v = 0; v < m.size(); ++v) {
        const auto u = std::size_t(v);
        const FwdState f = st.fwd[u];
        if (f == FwdState::Compressed) {
          bytes += packed_bytes(m.op(v).bytes, st.packing[u]);
          ++seen;
        } else if (f == FwdState::Live || f == FwdState::Computing || f == FwdState::Recomputing) {
          bytes += m.op(v).bytes;  // chains have no views
        }
        if (st.grad_live[u]) bytes += m.grad_bytes(v);
      }
      // A compress step holds A(v) and C(v): the graph draws A(v) live.
      if (is_compress(s.code[t].kind)) bytes += packed_bytes(m.op(s.code[t].op).bytes, packing_of(s.code[t].kind));
      // A decompress makes A(v) beside C(v), which is freed next.
      if (s.code[t].kind == InstrKind::Decompress) bytes += packed_bytes(m.op(s.code[t].op).bytes, facts.packing(s.code[t].op));
      EXPECT_EQ(bytes, sim.timeline[t]) << spec << " step " << t;
    }
    EXPECT_GT(seen, 0) << spec;
  }
}

TEST(CompressedView, TheWindowDrawsItYellowAndNamesTypeAndBytes) {
  StudioDocument doc;
  doc.loadModel("chain:7:64");
  doc.setSpecs({"sqrt+compress:bf16"});
  ASSERT_EQ(doc.runCount(), 1);
  ASSERT_TRUE(doc.runs()[0].ok()) << doc.runs()[0].error;
  const Schedule& s = doc.runs()[0].schedule;
  // The end of the forward pass: x and a3 held compressed (the case above).
  const std::size_t bwdLoss =
      std::size_t(std::find(s.code.begin(), s.code.end(), Instr{InstrKind::Bwd, 7}) - s.code.begin());
  ASSERT_LT(bwdLoss, s.code.size());
  doc.setStep(bwdLoss);
  ASSERT_EQ(doc.nodeStates().fwd[0], FwdState::Compressed);
  ASSERT_EQ(doc.nodeStates().fwd[3], FwdState::Compressed);
  GraphView view(&doc);
  view.resize(1200, 360);
  view.fitToView();
  const QImage img = view.grab().toImage();
  const double dpr = img.devicePixelRatio();
  const double r = GraphLayout::kRadius * std::min(std::abs(view.sceneTransform().m11()), std::abs(view.sceneTransform().m22()));
  ASSERT_GE(r, 6);
  // A point of the body between the core and the outline.
  auto body = [&](int op) { return img.pixelColor(((view.nodePosition(op) + QPointF(-0.6 * r, 0.5 * r)) * dpr).toPoint()); };
  EXPECT_EQ(body(0), okabe_ito::yellow());
  EXPECT_EQ(body(3), okabe_ito::yellow());
  EXPECT_EQ(body(6), okabe_ito::blue());  // a6: resident, kept whole
  EXPECT_NE(body(2), okabe_ito::yellow());  // a2: freed
  // Its core is the resident blue: the smaller stored copy.
  EXPECT_EQ(img.pixelColor((view.nodePosition(0) * dpr).toPoint()), okabe_ito::blue());
  // bf16 holds two bytes of each of the 16 floats.
  const QString tip = view.toolTipAt(view.nodePosition(3));
  EXPECT_TRUE(tip.contains("held compressed: bf16, 32 B stored of 64 B")) << tip.toStdString();
  EXPECT_FALSE(view.toolTipAt(view.nodePosition(6)).contains("compressed"));
  // The caption at the compress gives the same bytes.
  const std::size_t comp =
      std::size_t(std::find(s.code.begin(), s.code.end(), Instr{InstrKind::CompressBF16, 3}) - s.code.begin());
  doc.setStep(comp);
  EXPECT_TRUE(doc.caption().contains("compressing a3 to bf16: the checkpoint waits for its recompute in 32 B instead of 64 B"))
      << doc.caption().toStdString();
  // Its A is freed next: the copy waits, nothing is lost.
  doc.setStep(comp + 1);
  EXPECT_TRUE(doc.caption().contains("freeing a3: its compressed copy (bf16, 32 B of 64 B) waits until it is decompressed"))
      << doc.caption().toStdString();
}

// Offloaded and compressed (docs/memory-model.md): a checkpoint is
// compressed, its A freed, and C goes to the host and comes back; the
// captions of the copies say that C moves, at its stored size (f16: 2 bytes
// of each of x's 16 floats), and the node waits on the host meanwhile.
TEST(CompressedView, TheCopiesOfACompressedCheckpointSayWhatMoves) {
  StudioDocument doc;
  doc.loadModel("chain:7:64");
  doc.setSpecs({"offload+sqrt+compress:f16", "offload+sqrt"});
  ASSERT_TRUE(doc.runs()[0].ok()) << doc.runs()[0].error;
  const Schedule& s = doc.runs()[0].schedule;
  auto at = [&](Instr ins) { return std::size_t(std::find(s.code.begin(), s.code.end(), ins) - s.code.begin()); };
  const std::size_t comp = at({InstrKind::CompressF16, 0}), off = at({InstrKind::Offload, 0}),
                    get = at({InstrKind::Fetch, 0}), dec = at({InstrKind::Decompress, 0});
  ASSERT_LT(dec, s.code.size());
  EXPECT_LT(comp, off);
  EXPECT_LT(off, get);
  EXPECT_LT(get, dec);
  doc.setStep(off);
  EXPECT_TRUE(doc.caption().contains("offloading the compressed copy of x (f16, 32 B) to host memory"))
      << doc.caption().toStdString();
  EXPECT_EQ(doc.nodeStates().fwd[0], FwdState::OnHost);
  doc.setStep(get);
  EXPECT_TRUE(doc.caption().contains("fetching the compressed copy of x (f16, 32 B) back from host memory"))
      << doc.caption().toStdString();
  // Between the fetch and the decompress only C(x) is on the device.
  doc.setStep(get + 1);
  EXPECT_EQ(doc.nodeStates().fwd[0], FwdState::Compressed);
  // Uncompressed, the whole tensor moves.
  doc.setCurrentRun(1);
  const Schedule& plain = doc.runs()[1].schedule;
  doc.setStep(std::size_t(std::find(plain.code.begin(), plain.code.end(), Instr{InstrKind::Offload, 0}) - plain.code.begin()));
  EXPECT_TRUE(doc.caption().contains("offloading x to host memory")) << doc.caption().toStdString();
}

TEST(CompressedView, TheLegendHasTheCompressedEntry) {
  EXPECT_STREQ(node_style(NodeLook::ActCompressed).legend, "compressed (stored smaller)");
  EXPECT_TRUE(is_activation(NodeLook::ActCompressed));
  EXPECT_TRUE(node_style(NodeLook::ActCompressed).filled);
  EXPECT_EQ(node_style(NodeLook::ActCompressed).fill, okabe_ito::yellow());
}
