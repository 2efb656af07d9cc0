// The host tier of the memory model: offload A(v) / fetch A(v). Exact device
// and host timelines of a hand-written schedule (derived in the comments) and
// every rejection of the validator.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/resident_index.h"
#include "core/sim/schedule.h"
#include "core/sim/simulator.h"
#include "tests/core/schedule_test_util.h"
#include "tests/support/model_builders.h"

using namespace remat;
using namespace remat::testing;

namespace {

// chain:3 is x, a1, a2, loss, one byte each (Dense saves its input and its
// output; the loss saves its input; x and the loss have no gradient tensor).
// x and a1 go to the host during the forward pass and come back before the
// backward steps that read them.
std::vector<Instr> two_tier_chain3() {
  return {
      {F, 1},      //  0 dev {x,a1} 2            host 0
      {OFF, 0},    //  1 dev {a1} 1              host {x} 1
      {F, 2},      //  2 dev {a1,a2} 2
      {F, 3},      //  3 dev {a1,a2,loss} 3
      {OFF, 1},    //  4 dev {a2,loss} 2         host {x,a1} 2
      {B, 3},      //  5 + G(a2): 3
      {FA, 3},     //  6 2
      {GET, 1},    //  7 dev + a1: 3             host {x} 1
      {B, 2},      //  8 + G(a1): 4  (the device peak)
      {FG, 2},     //  9 3
      {FA, 2},     // 10 2 {a1, G(a1)}
      {GET, 0},    // 11 dev + x: 3              host 0
      {B, 1},      // 12 3 (x has no gradient tensor)
      {FG, 1},     // 13 2
      {FA, 1},     // 14 1
      {FA, 0},     // 15 0
  };
}

}  // namespace

TEST(OffloadIr, TwoTimelinesExactOnChain3) {
  const Model m = make_preset("chain:3");
  const Simulation s = simulate(m, Schedule{"hand", two_tier_chain3(), ""});
  EXPECT_EQ(s.timeline, (std::vector<uint64_t>{2, 1, 2, 3, 2, 3, 2, 3, 4, 3, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(s.host_timeline, (std::vector<uint64_t>{0, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.peak_bytes, 4u);
  EXPECT_EQ(s.peak_index, 8u);
  EXPECT_EQ(s.peak_host_bytes, 2u);
  EXPECT_EQ(s.transfers, 4);
  EXPECT_EQ(s.transfer_bytes, 4u);
  // Without a timeline the figures are the same.
  const Simulation f = simulate(m, Schedule{"hand", two_tier_chain3(), ""}, {.timeline = false});
  EXPECT_TRUE(f.host_timeline.empty());
  EXPECT_EQ(f.peak_host_bytes, 2u);
  EXPECT_EQ(f.peak_bytes, 4u);
}

TEST(OffloadIr, NoOffloadNoHostTimeline) {
  const Model m = make_preset("chain:3");
  const Simulation s = simulate(m, Schedule{"hand", {{F, 1}, {F, 2}, {F, 3}, {B, 3}, {FA, 3}, {B, 2}, {FG, 2}, {FA, 2}, {B, 1}, {FG, 1}, {FA, 1}, {FA, 0}}, ""});
  EXPECT_TRUE(s.host_timeline.empty());
  EXPECT_EQ(s.peak_host_bytes, 0u);
  EXPECT_EQ(s.transfers, 0);
}

TEST(OffloadIr, ResidentIndexReplaysFetchesFromSnapshots) {
  // A stride of 64 means snapshot 0 only; the host flags must survive it anyway:
  // the device set after each instruction is what the timeline counts.
  const Model m = make_preset("chain:3");
  const Schedule s{"hand", two_tier_chain3(), ""};
  const Simulation sim = simulate(m, s);
  const ResidentIndex idx(m, s);
  for (std::size_t t = 0; t < s.code.size(); ++t) EXPECT_EQ(idx.resident_at(t).size(), sim.timeline[t]) << t;
}

TEST(OffloadIr, InstructionText) {
  const Model m = make_preset("chain:3");
  EXPECT_EQ(to_string({OFF, 1}, m), "offload A(a1)");
  EXPECT_EQ(to_string({GET, 1}, m), "fetch A(a1)");
}

TEST(OffloadIr, FetchOfTensorNotOnHost) {
  const Model m = make_preset("chain:3");
  EXPECT_EQ(reject(m, {{F, 1}, {GET, 1}}), "1: instruction 1: fetch of A(a1) which is not on the host");
  // Fetched once, the host copy is gone: a second fetch has nothing to bring.
  EXPECT_EQ(reject(m, {{F, 1}, {OFF, 1}, {GET, 1}, {GET, 1}}), "3: instruction 3: fetch of A(a1) which is not on the host");
}

TEST(OffloadIr, ReadOfOffloadedTensor) {
  const Model m = make_preset("chain:3");
  EXPECT_EQ(reject(m, {{F, 1}, {OFF, 1}, {F, 2}}),
            "2: instruction 2: fwd A(a2) reads A(a1) which is on the host (offloaded; fetch it first)");
  // The backward's saved reads too: a2 is read by bwd a2 (it saves its output).
  const std::vector<Instr> code = {{F, 1}, {F, 2}, {F, 3}, {B, 3}, {OFF, 2}, {B, 2}};
  const std::string e = reject(m, code);
  EXPECT_EQ(e.substr(0, 3), "5: ");
  EXPECT_NE(e.find("reads A(a2) which is on the host"), std::string::npos) << e;
}

TEST(OffloadIr, OffloadOfTensorNotResident) {
  const Model m = make_preset("chain:3");
  EXPECT_EQ(reject(m, {{F, 1}, {FA, 1}, {OFF, 1}}), "2: instruction 2: offload of A(a1) which is not resident");
  EXPECT_EQ(reject(m, {{F, 1}, {OFF, 1}, {OFF, 1}}),
            "2: instruction 2: offload of A(a1) which is on the host (offloaded; fetch it first)");
  EXPECT_EQ(reject(m, {{F, 1}, {OFF, 1}, {FA, 1}}),
            "2: instruction 2: free of A(a1) which is on the host (offloaded; fetch it first)");
}

TEST(OffloadIr, RecomputeWhileOnHost) {
  const Model m = make_preset("chain:3");
  EXPECT_EQ(reject(m, {{F, 1}, {OFF, 1}, {F, 1}}),
            "2: instruction 2: fwd of A(a1) while its offloaded copy is on the host (a second copy)");
}

TEST(OffloadIr, CopyLeftOnHostAtTheEnd) {
  const Model m = make_preset("chain:3");
  std::vector<Instr> code = two_tier_chain3();
  code[14] = {OFF, 1};  // instead of freeing A(a1) after its last read
  EXPECT_EQ(reject(m, code), "16: instruction 16: the schedule ends with A(a1) on the host (offloaded, never fetched)");
}

TEST(OffloadIr, ViewsAreNotOffloadedAndPinTheirStorage) {
  const Model m = view_graph();  // 0 x, 1 r, 2 t (view of r), 3 matmul, 4 loss
  ASSERT_TRUE(m.op(2).view);
  EXPECT_EQ(reject(m, {{F, 1}, {F, 2}, {OFF, 2}}),
            "2: instruction 2: offload of A(Transpose2), a view: only a storage's owner (A(ReLU1)) can be offloaded");
  EXPECT_EQ(reject(m, {{F, 1}, {F, 2}, {OFF, 1}}),
            "2: instruction 2: offload of A(ReLU1) while a view of it still holds its storage");
  // Once the view is gone the owner moves, bytes and all.
  const Simulation s = [&] {
    std::vector<Instr> code = {{F, 1}, {F, 2}, {F, 3}, {F, 4}, {B, 4}, {FA, 4}, {FA, 3}, {B, 3},
                               {FG, 3}, {FA, 2}, {OFF, 1}, {B, 2}, {FG, 2}, {GET, 1}, {B, 1}, {FG, 1}, {FA, 1}, {FA, 0}};
    return simulate(m, Schedule{"hand", code, ""});
  }();
  EXPECT_EQ(s.peak_host_bytes, 32u);  // r: [4,2] float32
}
