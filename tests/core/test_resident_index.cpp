#include <gtest/gtest.h>

#include "core/model/presets.h"
#include "core/sim/resident_index.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

// Every step's answer equals a replay from zero, and its bytes the timeline's.
TEST(ResidentIndex, MatchesFullReplayAtEveryStep) {
  for (const char* model : {"chain:40", "transformer:2:8:2:1", "gpt:1:16:2:4:1:f32:10", "resnet:10:4"}) {
    const Model m = make_preset(model);
    // sqrt+compress:int8: compressed copies C(v) are listed and counted too.
    for (const char* spec : {"store-all", "recompute-all", "sqrt", "sqrt+compress:int8"}) {
      const Schedule s = make_strategy(spec)->schedule(m);
      const Simulation sim = simulate(m, s);
      const ResidentIndex index(m, s);
      ResidentSet replay(m);
      for (std::size_t t = 0; t < s.code.size(); ++t) {
        replay.apply(m, s.code[t]);
        const auto got = index.resident_at(t);
        uint64_t bytes = 0;
        std::vector<uint8_t> counted(static_cast<std::size_t>(m.size()), 0);  // storages, once each
        std::vector<uint8_t> grad_counted(static_cast<std::size_t>(m.size()), 0);  // gradient storages (an Add's inputs share one)
        for (const TensorRef& r : got) {
          EXPECT_TRUE(r.packed ? replay.packed[r.op] != 0
                      : r.aux  ? replay.aux[r.op]
                      : r.grad ? replay.grad[r.op]
                               : replay.act[r.op]);
          if (r.packed) bytes += packed_bytes(m.op(r.op).bytes, Packing::Int8);
          else if (r.aux) bytes += m.op(r.op).aux_bytes;
          else if (r.grad) bytes += grad_counted[static_cast<std::size_t>(replay.grad_storage[r.op])]++ ? 0 : m.grad_bytes(r.op);
          else if (!counted[static_cast<std::size_t>(m.storage(r.op))]++) bytes += m.op(m.storage(r.op)).bytes;
        }
        EXPECT_EQ(got.size(), replay.count);
        EXPECT_EQ(bytes, sim.timeline[t]) << model << " " << spec << " t=" << t;
        EXPECT_EQ(index.activations_at(t), replay.act);
      }
    }
  }
}

TEST(ResidentIndex, SqrtChain16AfterForwardPass) {
  const Model m = make_preset("chain:16");
  const Schedule s = make_strategy("sqrt")->schedule(m);
  const ResidentIndex index(m, s);
  std::size_t t = 0;
  while (!(s.code[t].kind == InstrKind::Fwd && s.code[t].op == 16)) ++t;
  // At the loss: checkpoints a0, a4, a8, a12, the last segment a13..a15, the loss.
  std::vector<int> live;
  for (const auto& r : index.resident_at(t)) live.push_back(r.op);
  EXPECT_EQ(live, (std::vector<int>{0, 4, 8, 12, 13, 14, 15, 16}));
}

TEST(ResidentIndex, StrideKeepsSnapshotsLinear) {
  const Model m = make_preset("chain:2000");
  const Schedule s = make_strategy("store-all")->schedule(m);
  const ResidentIndex index(m, s);
  // The largest resident set (2002 tensors) sets the stride, so snapshots hold
  // at most about one id per instruction.
  EXPECT_GE(index.stride(), 2002u);
  EXPECT_EQ(index.resident_at(s.code.size() - 1).size(), 0u);
}
