// `remat model`: the summary, --write (JSON that reads back), --dot, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/app/cli_runner.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CliModel, SummaryOfMlp) {
  const auto r = run_cli("model --model mlp:2:4:2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "model mlp:2:4:2: 6 ops\n"
            "kinds: 1 Input, 2 Linear, 1 MSELoss, 2 ReLU\n"
            "activations: 164 B in all (largest 32 B), parameters: 160 B\n"
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
  const auto r = run_cli("model -m " + std::string(REMAT_SOURCE_DIR) + "/resources/models/resnet-small.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("simulate-only ops (29): stem.conv, stem.bn, s0.b0.conv1,"), std::string::npos) << r.out;
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
