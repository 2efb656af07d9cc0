// remat simulate --parallel: the per-stage figures as a user reads them, on
// docs/parallel.md's GPT-3-sized example.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "tests/support/text_files.h"

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

}  // namespace

TEST(CliParallel, Gpt3StagesAsJson) {
  const CliResult r = run_cli(
      "simulate --model gpt:96:12288:96:2048:1:bf16 --parallel tp=8,sp,pp=8,micro-batches=64 "
      "--strategy store-all,attention-core --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parallel"], "tp=8,sp,pp=8,schedule=1f1b,micro-batches=64,dp=1,zero=0");
  ASSERT_EQ(j["strategies"].size(), 2u);
  // Korthikanti et al. 2022, Eq. 5 (s = 2048, b = 1, h = 12288, a = 96,
  // L = 96, t = 8): the first stage holds (sbhL/t)(34 + 5as/h), and 34 sbhL/t
  // under selective recomputation, within 2%.
  const double sbhl_t = 2048.0 * 12288 * 96 / 8;
  const double paper[] = {sbhl_t * (34 + 5.0 * 96 * 2048 / 12288), sbhl_t * 34};
  for (int i = 0; i < 2; ++i) {
    const auto& stages = j["strategies"][i]["stages"];
    ASSERT_EQ(stages.size(), 8u);
    EXPECT_EQ(stages[0]["in_flight"], 8);
    EXPECT_EQ(stages[7]["in_flight"], 1);
    const double first = 8 * stages[0]["held_per_micro_batch_bytes"].get<double>();
    EXPECT_NEAR(first / paper[i], 1.0, 0.02) << j["strategies"][i]["name"];
    for (const auto& s : stages)
      EXPECT_EQ(s["peak_bytes"].get<uint64_t>(),
                s["weights_bytes"].get<uint64_t>() + s["gradients_bytes"].get<uint64_t>() +
                    s["optimizer_bytes"].get<uint64_t>() + s["activations_bytes"].get<uint64_t>() +
                    s["buffers_bytes"].get<uint64_t>());
  }
}

TEST(CliParallel, TableNamesTheColumns) {
  const CliResult r = run_cli("simulate --model gpt:4:256:4:64:2:bf16 --parallel tp=2,pp=2,micro-batches=4 --strategy blocks");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("strategy blocks: step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage blocks       in-flight      held/mb      weights    gradients    optimizer  activations"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    0 0-1                  2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    1 2-3                  1"), std::string::npos) << r.out;
}

TEST(CliParallel, BadInputExitsTwoWithOneMessage) {
  auto one_line = [](const CliResult& r, const std::string& text) {
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "remat: error: " + text + "\n");
  };
  one_line(run_cli("simulate --model mlp:4 --parallel tp=2"),
           "--parallel: model 'mlp:4' is neither a gpt: nor a transformer: preset; only their blocks are split into ranks "
           "yet (gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]], transformer:L[:D[:SEQ[:BATCH]]])");
  one_line(run_cli("simulate --model gpt:2:256:4 --parallel tp=3"),
           "--parallel: tp=3 does not divide the head count 4 of 'gpt:2:256:4'");
  one_line(run_cli("simulate --model gpt:2:256:4 --parallel pp=4"),
           "--parallel: 2 blocks cannot fill 4 pipeline stages (pp x V) with one block each");
  one_line(run_cli("simulate --model gpt:2:256:4 --parallel pp=2 --micro-batches 4"),
           "--micro-batches and --parallel: give the micro-batches in --parallel (micro-batches=M)");
}

// --csv: the per-stage figures in FILE, a row per strategy and stage, and the
// per-stage timelines in FILE.timeline.csv, a row per strategy, stage and
// slot, each figure as --json gives it. 1F1B with p = 2, M = 4 takes
// 2(M + p - 1) = 10 slots; stage 0 runs F0 F1, waits (slot 2) with both in
// flight for stage 1's B0 (slot 2), and runs B0 in slot 3.
TEST(CliParallel, CsvHasTheStagesAndTheirTimelines) {
  const std::string csv = temp_path("stages.csv"), timeline = temp_path("stages.timeline.csv");
  std::filesystem::remove(timeline);
  const CliResult r = run_cli("simulate --model gpt:4:256:4:64:2:bf16 --parallel pp=2,micro-batches=4 "
                              "--strategy store-all,blocks --json --csv " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto stages = lines_of(csv);
  ASSERT_EQ(stages.size(), 1u + 2 * 2);
  EXPECT_EQ(stages[0],
            "strategy,stage,blocks,in_flight,held_per_micro_batch_bytes,micro_batch_peak_bytes,weights_bytes,gradients_bytes,"
            "optimizer_bytes,activations_bytes,buffers_bytes,peak_bytes,timeline_peak_bytes,peak_slot,idle,recompute_overhead");
  for (int i = 0; i < 4; ++i) {
    const auto f = fields(stages[static_cast<std::size_t>(i + 1)]);
    const auto& js = j["strategies"][i / 2]["stages"][i % 2];
    EXPECT_EQ(f[0], j["strategies"][i / 2]["name"].get<std::string>());
    EXPECT_EQ(f[1], std::to_string(i % 2));
    EXPECT_EQ(f[2], i % 2 ? "2-3" : "0-1");
    EXPECT_EQ(f[3], std::to_string(js["in_flight"].get<int>()));
    EXPECT_EQ(f[11], std::to_string(js["peak_bytes"].get<uint64_t>()));
    EXPECT_EQ(f[12], std::to_string(js["timeline"]["peak_bytes"].get<uint64_t>()));
    EXPECT_EQ(f[11], f[12]);  // 1F1B: the timeline's peak is the table's
    EXPECT_EQ(f[13], std::to_string(js["timeline"]["peak_slot"].get<int>()));
  }
  const auto rows = lines_of(timeline);
  ASSERT_EQ(rows.size(), 1u + 2 * 2 * 10);
  EXPECT_EQ(rows[0], "strategy,stage,slot,pass,micro_batch,chunk,waiting_backward,waiting_weight_grad,bytes");
  const auto& t0 = j["strategies"][0]["stages"][0]["timeline"];
  EXPECT_EQ(fields(rows[1]), (std::vector<std::string>{"store-all", "0", "0", "F", "0", "0", "1", "0", std::to_string(t0["bytes"][0].get<uint64_t>())}));
  EXPECT_EQ(fields(rows[3]), (std::vector<std::string>{"store-all", "0", "2", "", "", "", "2", "0", std::to_string(t0["bytes"][2].get<uint64_t>())}));
  EXPECT_EQ(fields(rows[4]), (std::vector<std::string>{"store-all", "0", "3", "B", "0", "0", "1", "0", std::to_string(t0["bytes"][3].get<uint64_t>())}));
  uint64_t most = 0;
  for (std::size_t i = 1; i <= 10; ++i) most = std::max<uint64_t>(most, std::stoull(fields(rows[i]).back()));
  EXPECT_EQ(most, j["strategies"][0]["stages"][0]["peak_bytes"].get<uint64_t>());
}

// --json: the schedule's grid and each stage's timeline. ZB-H1 (Qi et al.
// 2023) on p = 4: F, B and W of every micro-batch on every stage, p - r in
// flight on stage r, and stage r's r + 1 micro-batches waiting for their W
// once its last deferred B ends; the timeline's peak, with them, at least
// the table's.
TEST(CliParallel, JsonCarriesTheGridAndTimelines) {
  const CliResult r = run_cli("simulate --model gpt:8:256:4:64:2:bf16 --parallel pp=4,schedule=zb-h1,micro-batches=8 "
                              "--strategy blocks --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["grid"]["devices"].size(), 4u);
  for (int s = 0; s < 4; ++s) {
    const auto& passes = j["grid"]["devices"][s];
    EXPECT_EQ(passes.size(), 3u * 8);
    EXPECT_EQ(passes[0]["pass"], "F");
    EXPECT_EQ(passes[0]["slot"], s);  // the first forward as soon as the stage before sends it
    const auto& st = j["strategies"][0]["stages"][s];
    const auto& t = st["timeline"];
    EXPECT_EQ(t["bytes"].size(), j["grid"]["slots"].get<std::size_t>());
    const auto wb = t["waiting_backward"].get<std::vector<int>>(), ww = t["waiting_weight_grad"].get<std::vector<int>>();
    EXPECT_EQ(*std::max_element(wb.begin(), wb.end()), 4 - s);
    EXPECT_EQ(st["in_flight"], 4 - s);
    EXPECT_EQ(*std::max_element(ww.begin(), ww.end()), s + 1);
    const auto bytes = t["bytes"].get<std::vector<uint64_t>>();
    EXPECT_EQ(bytes[t["peak_slot"].get<std::size_t>()], t["peak_bytes"].get<uint64_t>());
    EXPECT_GE(t["peak_bytes"].get<uint64_t>(), st["peak_bytes"].get<uint64_t>());
  }
}

TEST(CliParallel, UnwritableCsvLeavesNoFile) {
  const CliResult r = run_cli("simulate --model gpt:4:256:4:64:2:bf16 --parallel pp=2 --csv /nonexistent-dir/s.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot write '/nonexistent-dir/s.csv'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/s.timeline.csv"));
}

// A captured Llama-style decoder (tests/parallel/models/llama4-captured.json,
// tests/parallel/test_block_stages.cpp says how it was made): its four
// layers, found as repeated blocks, two per stage; the stages' weights are
// the model's; under tensor parallelism each rank's share, and heads that
// tp does not divide refused naming the op.
TEST(CliParallel, CapturedModelSplitsByItsRepeatedBlocks) {
  const std::string llama = std::string(REMAT_PARALLEL_TEST_MODELS) + "/llama4-captured.json";
  const CliResult whole = run_cli("simulate --model " + llama + " --parallel pp=1 --strategy store-all --json");
  ASSERT_EQ(whole.code, 0) << whole.err;
  const CliResult r = run_cli("simulate --model " + llama + " --parallel pp=2,micro-batches=4 --strategy store-all,blocks --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& stages = j["strategies"][0]["stages"];
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0]["blocks"], "0-1");
  EXPECT_EQ(stages[1]["blocks"], "2-3");
  EXPECT_EQ(stages[0]["in_flight"], 2);
  EXPECT_EQ(stages[1]["in_flight"], 1);
  EXPECT_EQ(stages[0]["weights_bytes"].get<uint64_t>() + stages[1]["weights_bytes"].get<uint64_t>(),
            nlohmann::json::parse(whole.out)["strategies"][0]["stages"][0]["weights_bytes"].get<uint64_t>());
  // blocks keeps less a micro-batch than store-all on both stages.
  for (int s = 0; s < 2; ++s)
    EXPECT_LT(j["strategies"][1]["stages"][s]["held_per_micro_batch_bytes"].get<uint64_t>(),
              stages[s]["held_per_micro_batch_bytes"].get<uint64_t>());
  // Tensor parallelism on it (tests/parallel/test_tensor_split.cpp): each
  // stage's rank holds half its Linears' weights, the norms whole.
  const CliResult tp = run_cli("simulate --model " + llama + " --parallel tp=2,pp=2,micro-batches=4 --strategy store-all --json");
  ASSERT_EQ(tp.code, 0) << tp.err;
  const auto tp_json = nlohmann::json::parse(tp.out);
  const auto& tp_stages = tp_json["strategies"][0]["stages"];
  const uint64_t d = 32, v = 64, layer = 4 * d * d / 2 + 3 * d * 2 * d / 2 + 2 * d;
  EXPECT_EQ(tp_stages[0]["weights_bytes"].get<uint64_t>(), 4 * (v * d / 2 + 2 * layer));
  EXPECT_EQ(tp_stages[1]["weights_bytes"].get<uint64_t>(), 4 * (2 * layer + d + d * v / 2));
  // What cannot be split: one message naming the op, exit code 2, no output file.
  const std::string csv = (std::filesystem::temp_directory_path() / "remat-tp8-refused.csv").string();
  std::filesystem::remove(csv);
  const CliResult heads = run_cli("simulate --model " + llama + " --parallel tp=8,pp=2 --csv " + csv);
  EXPECT_EQ(heads.code, 2);
  EXPECT_EQ(heads.err, "remat: error: --parallel tp=8 on '" + llama +
                           "': op 'blocks.0.reshape' (Reshape [2,8,4,8]): tp=8 does not divide its axis 2 (4), across which it "
                           "would cut the tensor divided along axis 2 by the column-parallel 'blocks.0.wq.linear': each rank "
                           "must hold whole heads\n");
  EXPECT_FALSE(std::filesystem::exists(csv));
}
