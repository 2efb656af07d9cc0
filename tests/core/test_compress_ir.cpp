// Compressed checkpoints in the memory model: compress A(v) to a type, free
// A(v), decompress A(v), free C(v). The exact device (and host) timeline of a
// hand-written schedule, derived in the comments; every rejection of the
// validator; the time model's conversion cost.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/presets.h"
#include "core/sim/schedule.h"
#include "core/sim/simulator.h"
#include "core/sim/time_model.h"
#include "tests/core/schedule_test_util.h"

using namespace remat;
using namespace remat::testing;

namespace {

constexpr uint64_t T = 64;       // chain:3:64: every tensor 16 floats
constexpr uint64_t H = T / 2;    // its bf16 or f16 copy: 2 bytes an element
constexpr uint64_t Q = T / 4 + 4;  // its int8 copy: 1 byte an element + the f32 scale

// chain:3:64 is x, a1, a2, loss (Dense saves its input and output, the loss
// its input; x and the loss have no gradient tensor). x goes to bf16 and a1
// to int8 during the forward pass; each comes back before the backward that
// reads it.
std::vector<Instr> compressed_chain3() {
  return {
      {F, 1},    //  0 {x, a1}                 2T
      {CB, 0},   //  1 + C(x)                  2T + H
      {FA, 0},   //  2 {a1, C(x)}              T + H
      {F, 2},    //  3 {a1, a2, C(x)}          2T + H
      {C8, 1},   //  4 + C(a1)                 2T + H + Q
      {FA, 1},   //  5 {a2, C(x), C(a1)}       T + H + Q
      {F, 3},    //  6 + loss                  2T + H + Q
      {FA, 3},   //  7                         T + H + Q
      {B, 3},    //  8 + G(a2)                 2T + H + Q
      {DEC, 1},  //  9 + a1                    3T + H + Q
      {FC, 1},   // 10 - C(a1)                 3T + H
      {B, 2},    // 11 + G(a1)                 4T + H (the peak)
      {FG, 2},   // 12                         3T + H
      {FA, 2},   // 13 {a1, G(a1), C(x)}       2T + H
      {DEC, 0},  // 14 + x                     3T + H
      {FC, 0},   // 15                         3T
      {B, 1},    // 16 (x has no gradient)     3T
      {FG, 1},   // 17                         2T
      {FA, 1},   // 18                         T
      {FA, 0},   // 19                         0
  };
}

}  // namespace

TEST(CompressIr, TimelineExactOnChain3) {
  const Model m = make_preset("chain:3:64");
  const Simulation s = simulate(m, Schedule{"hand", compressed_chain3(), ""});
  EXPECT_EQ(s.timeline, (std::vector<uint64_t>{2 * T, 2 * T + H, T + H, 2 * T + H, 2 * T + H + Q, T + H + Q,
                                               2 * T + H + Q, T + H + Q, 2 * T + H + Q, 3 * T + H + Q, 3 * T + H,
                                               4 * T + H, 3 * T + H, 2 * T + H, 3 * T + H, 3 * T, 3 * T, 2 * T, T, 0}));
  EXPECT_EQ(s.peak_bytes, 4 * T + H);
  EXPECT_EQ(s.peak_index, 11u);
  EXPECT_EQ(s.conversions, 4);
  EXPECT_EQ(s.compressed_bytes, H + Q);
  EXPECT_TRUE(s.host_timeline.empty());
}

// x compressed to f16, then offloaded: the host holds its 32 bytes, the
// transfers move 32 each way.
TEST(CompressIr, OffloadMovesTheCompressedCopy) {
  const Model m = make_preset("chain:3:64");
  const std::vector<Instr> code = {
      {F, 1},    //  0 {x, a1}            2T      host 0
      {CH, 0},   //  1 + C(x)             2T + H
      {FA, 0},   //  2                    T + H
      {OFF, 0},  //  3 C(x) leaves        T       host H
      {F, 2},    //  4                    2T
      {F, 3},    //  5                    3T
      {FA, 3},   //  6                    2T
      {B, 3},    //  7 + G(a2)            3T
      {B, 2},    //  8 + G(a1)            4T
      {FG, 2},   //  9                    3T
      {FA, 2},   // 10                    2T
      {GET, 0},  // 11 C(x) back          2T + H  host 0
      {DEC, 0},  // 12 + x                3T + H
      {FC, 0},   // 13                    3T
      {B, 1},    // 14                    3T
      {FG, 1},   // 15                    2T
      {FA, 1},   // 16                    T
      {FA, 0},   // 17                    0
  };
  const Simulation s = simulate(m, Schedule{"hand", code, ""});
  EXPECT_EQ(s.timeline, (std::vector<uint64_t>{2 * T, 2 * T + H, T + H, T, 2 * T, 3 * T, 2 * T, 3 * T, 4 * T, 3 * T,
                                               2 * T, 2 * T + H, 3 * T + H, 3 * T, 3 * T, 2 * T, T, 0}));
  EXPECT_EQ(s.host_timeline,
            (std::vector<uint64_t>{0, 0, 0, H, H, H, H, H, H, H, H, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.peak_host_bytes, H);
  EXPECT_EQ(s.transfers, 2);
  EXPECT_EQ(s.transfer_bytes, 2 * H);
}

TEST(CompressIr, InstructionText) {
  const Model m = make_preset("chain:3:64");
  EXPECT_EQ(to_string({CB, 1}, m), "compress A(a1) to bf16");
  EXPECT_EQ(to_string({CH, 1}, m), "compress A(a1) to f16");
  EXPECT_EQ(to_string({C8, 1}, m), "compress A(a1) to int8");
  EXPECT_EQ(to_string({DEC, 1}, m), "decompress A(a1)");
  EXPECT_EQ(to_string({FC, 1}, m), "free C(a1)");
}

TEST(CompressIr, ValidatorRejectsMalformedCompression) {
  const Model m = make_preset("chain:3:64");
  EXPECT_EQ(reject(m, {{CB, 1}}), "0: instruction 0: compress of A(a1) which is not resident");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 0}, {C8, 0}}), "2: instruction 2: compress of A(x) while C(x) already exists");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 0}, {FA, 0}, {F, 2}, {F, 3}, {B, 3}, {B, 2}, {B, 1}}),
            "7: instruction 7: bwd of op 1 reads A(x) which is compressed (decompress it first)");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 1}, {FA, 1}, {F, 2}}),
            "3: instruction 3: fwd A(a2) reads A(a1) which is compressed (decompress it first)");
  EXPECT_EQ(reject(m, {{DEC, 1}}), "0: instruction 0: decompress of A(a1) without C(a1) (nothing was compressed)");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 1}, {DEC, 1}}), "2: instruction 2: decompress of A(a1) which is already resident");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 1}, {FA, 1}, {F, 1}}),
            "3: instruction 3: fwd of A(a1) while its compressed copy C(a1) is resident (a second copy)");
  EXPECT_EQ(reject(m, {{FC, 1}}), "0: instruction 0: free of C(a1) which is not resident");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 1}, {FC, 1}, {FC, 1}}), "3: instruction 3: free of C(a1) which is not resident");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 1}, {OFF, 1}}),
            "2: instruction 2: offload of A(a1) while both it and its compressed copy C(a1) are on the device (free one first)");
  EXPECT_EQ(reject(m, {{F, 1}, {CB, 0}, {FA, 0}, {OFF, 0}, {DEC, 0}}),
            "4: instruction 4: decompress of A(x) without C(x) on the device (it is on the host; fetch it first)");
  // Not an f32 tensor of whole floats: chain:3's tensors are one byte each.
  EXPECT_EQ(reject(make_preset("chain:3"), {{F, 1}, {CB, 1}}),
            "1: instruction 1: compress of A(a1), which is not an f32 tensor of whole floats");
}

TEST(CompressIr, ScheduleEndingWithACompressedCopyIsRejected) {
  const Model m = make_preset("chain:3:64");
  // x compressed beside itself and never freed: everything else is the plain store-all program.
  const std::vector<Instr> code = {{F, 1}, {CB, 0}, {F, 2}, {F, 3}, {FA, 3}, {B, 3}, {B, 2}, {FG, 2}, {FA, 2},
                                   {B, 1}, {FG, 1}, {FA, 1}, {FA, 0}};
  EXPECT_EQ(reject(m, code), "13: instruction 13: the schedule ends with C(x), a compressed copy never freed");
}

// A view's bytes belong to its owner: only owners are compressed.
TEST(CompressIr, ViewsAreNotCompressed) {
  const Model m = make_preset("gpt:1:8:2:4:1:f32:16");  // attention splits heads with views
  int view = -1;
  for (int v = 0; v < m.size() && view < 0; ++v)
    if (m.op(v).view) view = v;
  ASSERT_GE(view, 0);
  std::vector<Instr> code;
  for (int v = 1; v <= view; ++v) code.push_back({F, v});
  code.push_back({CB, view});
  const std::string e = reject(m, code);
  EXPECT_NE(e.find("a view: only a storage's owner"), std::string::npos) << e;
}

// Conversions run on the compute stream at the device's memory bandwidth:
// bytes read plus bytes written. On compressed_chain3: compress x to bf16
// (T + H), a1 to int8 (T + Q), and each back: 2 (T + H) + 2 (T + Q) bytes.
TEST(CompressIr, TimeModelCountsConversionBytes) {
  const Model m = make_preset("chain:3:64");
  const TimeModel tm{.device_flops = 1e9, .link_bandwidth = 1e9, .device_bandwidth = 1000};
  const Simulation s = simulate(m, Schedule{"hand", compressed_chain3(), ""}, {.timeline = false, .time = &tm});
  const double convert = static_cast<double>(2 * (T + H) + 2 * (T + Q)) / 1000;
  EXPECT_DOUBLE_EQ(s.time.convert_s, convert);
  double flops = 0;
  for (int v = 1; v < m.size(); ++v) flops += m.op(v).fwd_flops + m.op(v).bwd_flops;
  EXPECT_DOUBLE_EQ(s.time.compute_s, flops / 1e9);
  EXPECT_DOUBLE_EQ(s.time.stall_s, 0);
  EXPECT_DOUBLE_EQ(s.time.step_s, s.time.compute_s + convert);
  EXPECT_EQ(TimeModel{}.device_bandwidth, 2e12);
}
