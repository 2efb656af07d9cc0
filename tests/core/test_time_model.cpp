// The time model's arithmetic on a hand-written offloading schedule: expected
// times derived here from the model's FLOPs, the bytes and the two rates.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/base/spec_parse.h"
#include "core/base/errors.h"
#include "core/sim/time_model.h"
#include "tests/core/schedule_test_util.h"

using namespace remat;
using namespace remat::testing;

namespace {

// chain:3:BYTES (x, a1, a2, loss): x and a1 go to the host in the forward
// pass, a1 comes back for bwd a2 and x for bwd a1 (test_offload_ir.cpp has
// the same program with its memory derived).
Schedule program() {
  return {"hand",
          {{F, 1}, {OFF, 0}, {F, 2}, {F, 3}, {OFF, 1}, {B, 3}, {FA, 3}, {GET, 1}, {B, 2}, {FG, 2}, {FA, 2},
           {GET, 0}, {B, 1}, {FG, 1}, {FA, 1}, {FA, 0}},
          ""};
}

StepTime predict(const Model& m, double flops, double bandwidth) {
  const TimeModel tm{.device_flops = flops, .link_bandwidth = bandwidth};
  const Simulation s = simulate(m, program(), {.timeline = false, .time = &tm});
  EXPECT_TRUE(s.time.predicted);
  return s.time;
}

}  // namespace

TEST(TimeModel, CopiesOnlyWhenComputeIsFree) {
  // Infinite throughput: compute takes nothing, so each copy waits only for
  // the one before it. At 4 bytes/s a 4-byte tensor takes 1 s: offload x
  // [0,1], offload a1 [1,2], fetch a1 [2,3] (bwd a2 waits 3 s), fetch x [3,4]
  // (issued at 3 when bwd a2 ends, bwd a1 waits 1 s more).
  const Model m = make_preset("chain:3:4");
  const StepTime t = predict(m, std::numeric_limits<double>::infinity(), 4.0);
  EXPECT_DOUBLE_EQ(t.compute_s, 0.0);
  EXPECT_DOUBLE_EQ(t.transfer_s, 4.0);
  EXPECT_DOUBLE_EQ(t.stall_s, 4.0);
  EXPECT_DOUBLE_EQ(t.step_s, 4.0);
}

TEST(TimeModel, InstantLinkNeverStalls) {
  const Model m = make_preset("chain:3:4");
  const double rate = 1e3;
  const StepTime t = predict(m, rate, std::numeric_limits<double>::infinity());
  double flops = 0;  // every op once forward and once backward
  for (int v = 1; v < m.size(); ++v) flops += m.op(v).fwd_flops + m.op(v).bwd_flops;
  EXPECT_DOUBLE_EQ(t.compute_s, flops / rate);
  EXPECT_DOUBLE_EQ(t.transfer_s, 0.0);
  EXPECT_DOUBLE_EQ(t.stall_s, 0.0);
  EXPECT_DOUBLE_EQ(t.step_s, flops / rate);
}

TEST(TimeModel, StallIsWhatTheFetchHasLeft) {
  // Both finite: the two streams by hand, in program order.
  const Model m = make_preset("chain:3:64");
  const double rate = 1e4, bw = 100;  // 64-byte tensors: 0.64 s a copy
  auto f = [&](int v) { return m.op(v).fwd_flops / rate; };
  auto b = [&](int v) { return m.op(v).bwd_flops / rate; };
  const double copy = 64 / bw;
  double t = f(1);                              // fwd a1
  double c = t + copy;                          // offload x after it
  t += f(2) + f(3);                             // fwd a2, fwd loss
  c = std::max(c, t) + copy;                    // offload a1
  t += b(3);                                    // bwd loss
  c = std::max(c, t) + copy;                    // fetch a1: lands at c
  const double a1_lands = c;
  double stall = std::max(0.0, a1_lands - t);
  t = std::max(t, a1_lands) + b(2);             // bwd a2
  c = std::max(c, t) + copy;                    // fetch x
  stall += std::max(0.0, c - t);
  t = std::max(t, c) + b(1);                    // bwd a1
  const StepTime got = predict(m, rate, bw);
  EXPECT_DOUBLE_EQ(got.transfer_s, 4 * copy);
  EXPECT_DOUBLE_EQ(got.stall_s, stall);
  EXPECT_DOUBLE_EQ(got.step_s, t);
  EXPECT_GT(stall, 0.0);  // the rates were chosen so that fetches stall
  EXPECT_DOUBLE_EQ(got.step_s, got.compute_s + got.stall_s);
}

TEST(TimeModel, ListsEachStalledInstruction) {
  // The first test's rates: bwd a2 (index 8) waits 3 s for a1, bwd a1 (index
  // 12) 1 s more for x; nothing else waits.
  const Model m = make_preset("chain:3:4");
  const TimeModel tm{.device_flops = std::numeric_limits<double>::infinity(), .link_bandwidth = 4.0};
  std::vector<Stall> stalls;
  const StepTime t = predict_step_time(m, program(), tm, &stalls);
  ASSERT_EQ(stalls.size(), 2u);
  EXPECT_EQ(program().code[8], (Instr{B, 2}));
  EXPECT_EQ(stalls[0].instruction, 8u);
  EXPECT_DOUBLE_EQ(stalls[0].seconds, 3.0);
  EXPECT_EQ(program().code[12], (Instr{B, 1}));
  EXPECT_EQ(stalls[1].instruction, 12u);
  EXPECT_DOUBLE_EQ(stalls[1].seconds, 1.0);
  EXPECT_DOUBLE_EQ(stalls[0].seconds + stalls[1].seconds, t.stall_s);
}

TEST(TimeModel, NotPredictedUnlessAsked) {
  const Model m = make_preset("chain:3:4");
  const Simulation s = simulate(m, program());
  EXPECT_FALSE(s.time.predicted);
  EXPECT_EQ(s.time.step_s, 0.0);
}

TEST(TimeModel, RatesParseWithDecimalPrefixes) {
  EXPECT_DOUBLE_EQ(parse_rate("25G", "--link-bandwidth"), 25e9);
  EXPECT_DOUBLE_EQ(parse_rate("1.5T", "--device-flops"), 1.5e12);
  EXPECT_DOUBLE_EQ(parse_rate("16e9", "--link-bandwidth"), 16e9);
  for (const char* bad : {"", "0", "-3", "fast", "12X", "G"}) {
    try {
      parse_rate(bad, "--link-bandwidth");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--link-bandwidth must be a positive number"), std::string::npos) << e.what();
    }
  }
}
