// `remat model`: the summary, --write (JSON that reads back), --dot, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/app/cli_runner.h"
#include "tests/support/text_files.h"

namespace {

using remat::testing::slurp;

TEST(CliModel, SummaryOfMlp) {
  const auto r = run_cli("model --model mlp:2:4:2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "model mlp:2:4:2: 6 ops\n"
            "kinds: 1 Input, 2 Linear, 1 MSELoss, 2 ReLU\n"
            "activations: 164 B in all (largest 32 B), parameters: 160 B\n"
            "saved for backward: 96 B (96 bytes; store-all at the end of the forward pass; aux 0 B)\n"  // x, 2 ReLUs
            "flops: forward 168, backward 312\n"  // 2·(2·2·4·4 + 8) + 3·8; 2·(4·2·4·4 + 16) + 3·8
            "simulate-only ops: none (executable with remat run)\n");
  EXPECT_EQ(r.err, "");
}

TEST(CliModel, WriteAndDotThenReadBack) {
  const std::string json = temp_path("t.json"), dot = temp_path("t.dot");
  auto r = run_cli("model -m transformer:1:8:2:1 --write " + json + " --dot " + dot);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + json + "\nwrote " + dot + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(json).rfind("{\"format\": \"remat-model\", \"version\": 1, \"name\": \"transformer:1:8:2:1\",\n \"ops\": [\n", 0), 0u);
  EXPECT_NE(slurp(dot).find("1[label=\"b0.ln1\\nLayerNorm [2,8]\"];"), std::string::npos);
  const auto again = run_cli("model -m " + json);
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out.substr(again.out.find('\n')), r.out.substr(r.out.find('\n'), again.out.size() - again.out.find('\n')));
}

TEST(CliModel, SimulateOnlyOpsAreNamed) {
  // ResNet-18's convolutions, batch norms, pools and views all have CPU kernels.
  const auto resnet = run_cli("model -m " + std::string(REMAT_SOURCE_DIR) + "/resources/models/resnet-small.json");
  ASSERT_EQ(resnet.code, 0) << resnet.err;
  EXPECT_NE(resnet.out.find("simulate-only ops: none (executable with remat run)"), std::string::npos) << resnet.out;
  // GPT-2 small is stored in bf16: it runs as mixed precision (f32 compute)
  // on the CPU, so nothing of it is simulate-only any more.
  const auto gpt = run_cli("model -m " + std::string(REMAT_SOURCE_DIR) + "/resources/models/gpt2-small.json");
  ASSERT_EQ(gpt.code, 0) << gpt.err;
  EXPECT_NE(gpt.out.find("simulate-only ops: none (executable with remat run)"), std::string::npos) << gpt.out;
  // chain:8's byte-sized tensors are marked simulate-only: every op is named, with one line per kind.
  const auto chain = run_cli("model -m chain:8");
  ASSERT_EQ(chain.code, 0) << chain.err;
  EXPECT_NE(chain.out.find("simulate-only ops (9): x, a1, a2, a3, a4, a5, a6, a7, loss\n"
                           "  why: Dense: marked simulate_only (7 op(s), first a1)\n"),
            std::string::npos)
      << chain.out;
}

TEST(CliModel, SavedBytesAreWhatTheBackwardReads) {
  // mlp:2:8:4: the first Linear keeps the input, each ReLU its output (the MSE
  // loss reads the last one too): three [4,8] f32 tensors, 128 bytes each.
  const auto r = run_cli("model -m mlp:2:8:4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("saved for backward: 384 B (384 bytes; store-all at the end of the forward pass; aux 0 B)"),
            std::string::npos)
      << r.out;
  // gpt:1:8:2:4:1:f32:10 has views: its summary says how many own nothing
  // (3 slices, 3 head reshapes, 4 transposes; the reshape back is a copy).
  EXPECT_NE(run_cli("model -m gpt:1:8:2:4:1:f32:10").out.find("; 10 view(s) owning none)"), std::string::npos);
  const auto s = run_cli("simulate -m mlp:2:8:4 -s store-all --json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("\"saved_bytes\":384"), std::string::npos) << s.out;
}

TEST(CliModel, BadFileIsOneErrorExit2AndNoOutputFile) {
  const std::string bad = temp_path("bad.json"), out = temp_path("never.json");
  std::ofstream(bad) << R"({"format":"remat-model","version":1,"ops":[{"id":0,"kind":"Input","shape":[4,0]},{"id":1,"kind":"MSELoss","inputs":[0]}]})";
  const auto r = run_cli("model -m " + bad + " --write " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "remat: error: model file '" + bad + "': /ops/0/shape/1: value 0 is out of range [1, 1099511627776]\n");
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
