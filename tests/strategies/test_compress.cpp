// SPEC+compress:DTYPE: which checkpoints are compressed, where the
// conversions go, and the exact device timeline of a small chain, derived by
// hand below; the spec's errors; offload of a compressed copy.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/compress.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;

namespace {

std::vector<std::string> listing(const Model& m, const Schedule& s) {
  std::vector<std::string> out;
  for (const Instr& i : s.code) out.push_back(to_string(i, m));
  return out;
}

std::string error_of(const std::string& spec) {
  return remat::testing::input_error_of([&] { (void)make_strategy(spec); });
}

// chain:7:64 is x, a1..a6, loss, every tensor and gradient T = 64 bytes (16
// floats; the loss's too: chain sizes every op alike). Dense saves its input
// and output, the loss its input; x and the loss have no gradient tensor.
// sqrt: ceil(sqrt(7)) = 3, checkpoints a3 and a6; the backward runs bwd loss
// (reads a6), then recomputes a4, a5 from a3 for bwd a6..a4, then a1, a2 from
// x for bwd a3..a1.
//
// Compressed: x (first backward read: the recompute of a1) and a3 (the
// recompute of a4); not a6, which bwd loss and bwd a6 read directly. Each is
// compressed right after its last forward read (x after fwd a1, a3 after
// fwd a4) and decompressed right before that recompute. C = stored size.
struct Step {
  const char* instr;
  int t;  // whole tensors resident while it runs
  int c;  // compressed copies resident
};
const std::vector<Step> kChain7Sqrt = {
    {"fwd a1", 2, 0},                  // x, a1
    {"compress A(x)", 2, 1},           // x, a1, C(x)
    {"free A(x)", 1, 1},
    {"fwd a2", 2, 1},
    {"free A(a1)", 1, 1},
    {"fwd a3", 2, 1},
    {"free A(a2)", 1, 1},              // a3, C(x)
    {"fwd a4", 2, 1},
    {"compress A(a3)", 2, 2},          // a3, a4, C(x), C(a3)
    {"free A(a3)", 1, 2},
    {"fwd a5", 2, 2},
    {"free A(a4)", 1, 2},
    {"fwd a6", 2, 2},
    {"free A(a5)", 1, 2},              // a6, C(x), C(a3)
    {"fwd loss", 2, 2},
    {"free A(loss)", 1, 2},
    {"bwd loss", 2, 2},                // + G(a6)
    {"decompress A(a3)", 3, 2},        // + a3 beside C(a3)
    {"free C(a3)", 3, 1},
    {"fwd a4", 4, 1},
    {"fwd a5", 5, 1},
    {"bwd a6", 6, 1},                  // a6, G(a6), a3, a4, a5, G(a5), C(x): the peak
    {"free G(a6)", 5, 1},
    {"free A(a6)", 4, 1},
    {"bwd a5", 5, 1},                  // + G(a4)
    {"free G(a5)", 4, 1},
    {"free A(a5)", 3, 1},
    {"bwd a4", 4, 1},                  // + G(a3)
    {"free G(a4)", 3, 1},
    {"free A(a4)", 2, 1},              // a3, G(a3), C(x)
    {"decompress A(x)", 3, 1},
    {"free C(x)", 3, 0},
    {"fwd a1", 4, 0},
    {"fwd a2", 5, 0},
    {"bwd a3", 6, 0},                  // x, a1, a2, a3, G(a3), G(a2)
    {"free G(a3)", 5, 0},
    {"free A(a3)", 4, 0},
    {"bwd a2", 5, 0},
    {"free G(a2)", 4, 0},
    {"free A(a2)", 3, 0},
    {"bwd a1", 3, 0},                  // x has no gradient tensor
    {"free G(a1)", 2, 0},
    {"free A(x)", 1, 0},
    {"free A(a1)", 0, 0},
};

void expect_timeline(const Model& m, const std::string& spec, const char* type, uint64_t c) {
  constexpr uint64_t T = 64;
  const Schedule s = make_strategy(spec)->schedule(m);
  EXPECT_EQ(s.strategy, spec);
  const Simulation sim = simulate(m, s);
  std::vector<std::string> want_code;
  std::vector<uint64_t> want_bytes;
  for (const Step& st : kChain7Sqrt) {
    std::string text = st.instr;
    if (text.starts_with("compress")) text += std::string(" to ") + type;
    want_code.push_back(text);
    want_bytes.push_back(T * static_cast<uint64_t>(st.t) + c * static_cast<uint64_t>(st.c));
  }
  EXPECT_EQ(listing(m, s), want_code);
  EXPECT_EQ(sim.timeline, want_bytes);
  EXPECT_EQ(sim.peak_bytes, 6 * T + c);
  EXPECT_EQ(sim.peak_index, 21u);
  EXPECT_EQ(sim.conversions, 4);
  EXPECT_EQ(sim.compressed_bytes, 2 * c);
  // Compression changes no compute: sqrt's steps and FLOPs exactly.
  const Simulation plain = simulate(m, make_strategy("sqrt")->schedule(m));
  EXPECT_EQ(sim.forward_steps, plain.forward_steps);
  EXPECT_EQ(sim.recompute_flops, plain.recompute_flops);
  // sqrt's own peak is at the same step with x whole: 7 T.
  EXPECT_EQ(plain.peak_bytes, 7 * T);
}

}  // namespace

// bf16: 16 floats in 2 bytes each, C = 32 bytes.
TEST(Compress, Chain7SqrtBf16TimelineByHand) {
  expect_timeline(make_preset("chain:7:64"), "sqrt+compress:bf16", "bf16", 32);
}

// f16: the same size as bf16.
TEST(Compress, Chain7SqrtF16TimelineByHand) {
  expect_timeline(make_preset("chain:7:64"), "sqrt+compress:f16", "f16", 32);
}

// int8: 16 one-byte codes and the f32 scale, C = 16 + 4 = 20 bytes.
TEST(Compress, Chain7SqrtInt8TimelineByHand) {
  expect_timeline(make_preset("chain:7:64"), "sqrt+compress:int8", "int8", 20);
}

// What a compressed copy costs, per type: 2 bytes an element, or 1 and the scale.
TEST(Compress, StoredSizes) {
  EXPECT_EQ(packed_bytes(4000, Packing::BF16), 2000u);
  EXPECT_EQ(packed_bytes(4000, Packing::F16), 2000u);
  EXPECT_EQ(packed_bytes(4000, Packing::Int8), 1004u);
}

// Nothing waits for a recompute under store-all: the schedule is store-all's,
// with a note that says so. On a chain of 1-byte tensors (not whole floats)
// nothing can be converted either.
TEST(Compress, NothingToCompressLeavesTheScheduleWithANote) {
  const Model m = make_preset("chain:7:64");
  const Schedule plain = make_strategy("store-all")->schedule(m);
  const Schedule s = make_strategy("store-all+compress:bf16")->schedule(m);
  EXPECT_EQ(s.code, plain.code);
  EXPECT_NE(s.note.find("nothing is compressed"), std::string::npos) << s.note;

  const Model bytes = make_preset("chain:7");
  EXPECT_EQ(make_strategy("sqrt+compress:int8")->schedule(bytes).code, make_strategy("sqrt")->schedule(bytes).code);
}

// int8 on a one-float tensor would grow it (1 + 4 > 4 bytes): left whole.
TEST(Compress, Int8NeverGrowsATensor) {
  const Model m = make_preset("chain:7:4");
  EXPECT_EQ(make_strategy("sqrt+compress:int8")->schedule(m).code, make_strategy("sqrt")->schedule(m).code);
  EXPECT_EQ(simulate(m, make_strategy("sqrt+compress:bf16")->schedule(m)).conversions, 4);
}

// The modifier over any base, validated, never above the base's peak on these
// models, and the spec round-trips.
TEST(Compress, EveryBaseStaysValid) {
  for (const char* model : {"chain:12:64", "mlp:6:16:4", "transformer:2:16:4:2", "gpt:2:16:2:8:2:f32:32"}) {
    const Model m = make_preset(model);
    for (const char* base : {"sqrt", "every-k:2", "recompute-all", "auto", "selective", "offload+sqrt", "offload"}) {
      for (const char* type : {"bf16", "f16", "int8"}) {
        const std::string spec = std::string(base) + "+compress:" + type;
        SCOPED_TRACE(std::string(model) + " " + spec);
        const auto st = make_strategy(spec);
        EXPECT_EQ(st->name(), spec);
        const Schedule s = st->schedule(m);
        Simulation sim, plain;
        ASSERT_NO_THROW(sim = simulate(m, s));
        ASSERT_NO_THROW(plain = simulate(m, make_strategy(base)->schedule(m)));
        EXPECT_LE(sim.peak_bytes, plain.peak_bytes);
        EXPECT_EQ(sim.recompute_flops, plain.recompute_flops);
        const auto limit = st->size(m, 1u << 30);
        EXPECT_LE(s.code.size(), limit.instructions);
      }
    }
  }
  const Model chain = make_preset("chain:30:64");
  const Simulation b = simulate(chain, make_strategy("budget:1K+compress:int8")->schedule(chain));
  EXPECT_GT(b.conversions, 0);
}

// offload+sqrt+compress:f16 on chain:7:64: x and a3 are compressed before they
// are offloaded, so the host holds their compressed copies (2 · 32 bytes at
// most) and each transfer moves 32 bytes; they are decompressed after the fetch.
TEST(Compress, OffloadMovesTheCompressedCopies) {
  const Model m = make_preset("chain:7:64");
  const Schedule s = make_strategy("offload+sqrt+compress:f16")->schedule(m);
  const Simulation sim = simulate(m, s);
  EXPECT_EQ(sim.transfers, 4);
  EXPECT_EQ(sim.transfer_bytes, 4u * 32u);
  EXPECT_EQ(sim.peak_host_bytes, 2u * 32u);
  const auto code = listing(m, s);
  auto at = [&](const std::string& text) {
    return std::find(code.begin(), code.end(), text) - code.begin();
  };
  EXPECT_LT(at("compress A(x) to f16"), at("offload A(x)"));
  EXPECT_LT(at("free A(x)"), at("offload A(x)"));
  EXPECT_LT(at("fetch A(a3)"), at("decompress A(a3)"));
  EXPECT_LT(at("fetch A(x)"), at("decompress A(x)"));
  // The peak is at bwd a6, as sqrt's: a6, G(a6), a3, a4, a5, G(a5), and x,
  // fetched one segment ahead (at the recompute of a4). offload+sqrt brings x
  // back whole there (7 T); compressed, it comes back as C(x) and is
  // decompressed only before the recompute of a1 (6 T + 32).
  EXPECT_EQ(simulate(m, make_strategy("offload+sqrt")->schedule(m)).peak_bytes, 7u * 64u);
  EXPECT_EQ(sim.peak_bytes, 6u * 64u + 32u);
}

TEST(Compress, BadSpecsNameTheSpec) {
  EXPECT_EQ(error_of("sqrt+compress:fp8"), "strategy 'sqrt+compress:fp8': unknown compression type 'fp8' (known: bf16, f16, int8)");
  EXPECT_EQ(error_of("compress:bf16"),
            "strategy 'compress:bf16' needs a strategy before it: compress modifies another, as in sqrt+compress:bf16");
  EXPECT_EQ(error_of("+compress:bf16"), "strategy '+compress:bf16' needs a strategy before '+': sqrt+compress:bf16");
  EXPECT_EQ(error_of("sqrt+compress:bf16+compress:int8"),
            "strategy 'sqrt+compress:bf16+compress:int8': compress is given twice (one compression type per strategy)");
  EXPECT_EQ(error_of("sqrt+compress"), "strategy 'sqrt+compress' needs an argument: compress:DTYPE");
  EXPECT_EQ(error_of("sqrt+compress:"), "strategy 'sqrt+compress:' needs an argument: compress:DTYPE");
  EXPECT_EQ(error_of("fastest+compress:bf16").substr(0, 27), "unknown strategy 'fastest' ");
  // Accepted: any base, offload's wrapping included; a manual list keeps its commas.
  EXPECT_EQ(make_strategy("budget:1K+compress:int8")->name(), "budget:1024+compress:int8");
  EXPECT_EQ(make_strategy("offload+sqrt+compress:f16")->name(), "offload+sqrt+compress:f16");
  EXPECT_EQ(split_strategy_list("store-all,manual:1,2+compress:bf16,sqrt"),
            (std::vector<std::string>{"store-all", "manual:1,2+compress:bf16", "sqrt"}));
}
