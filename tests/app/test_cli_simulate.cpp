#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "tests/support/text_files.h"

namespace {
using remat::testing::count_lines;
}  // namespace

TEST(CliSimulate, Chain16Table) {
  const CliResult r = run_cli("simulate --model chain:16 --strategy store-all,recompute-all,sqrt");
  ASSERT_EQ(r.code, 0) << r.err;
  // strategy, peak, tensors, fwd steps, recomputed, bwd steps (checked by hand in README).
  EXPECT_NE(r.out.find("store-all                        18 B        18         16           0        16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recompute-all                     5 B         5        136         120        16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sqrt                              9 B         9         25           9        16"), std::string::npos) << r.out;
}

TEST(CliSimulate, JsonCarriesTimelines) {
  const CliResult r = run_cli("simulate --model chain:16:4 --strategy store-all,manual:4,8,12 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["name"], "chain:16:4");
  EXPECT_EQ(j["model"]["ops"], 17);
  ASSERT_EQ(j["strategies"].size(), 2u);
  for (const auto& s : j["strategies"]) {
    for (const char* key : {"name", "peak_bytes", "forward_steps", "backward_steps", "recompute_steps", "flops", "overhead", "timeline"})
      EXPECT_TRUE(s.contains(key)) << key;
    const auto timeline = s["timeline"].get<std::vector<uint64_t>>();
    EXPECT_EQ(timeline.size(), s["instructions"].get<std::size_t>());
    EXPECT_EQ(*std::max_element(timeline.begin(), timeline.end()), s["peak_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(j["strategies"][0]["peak_bytes"], 18 * 4);
  EXPECT_EQ(j["strategies"][1]["name"], "manual:4,8,12");  // the same checkpoints as sqrt
  EXPECT_EQ(j["strategies"][1]["peak_bytes"], 9 * 4);
}

TEST(CliSimulate, CsvFile) {
  const std::string csv = temp_path("timelines.csv");
  const CliResult r = run_cli("simulate --model chain:4 --strategy store-all,sqrt --csv " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(csv);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(count_lines(all), 1 + 16 + 18);  // header + chain:4's two schedules
  EXPECT_EQ(all.substr(0, all.find('\n')), "strategy,step,instruction,bytes");
  EXPECT_NE(all.find("\"sqrt\",10,fwd a1,4\n"), std::string::npos);  // the recompute of a1
}

TEST(CliSimulate, BadInputExitsTwoWithOneMessage) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"simulate --model chain:abc", "remat: error: chain length N in 'chain:abc' must be an integer, got 'abc'\n"},
      {"simulate --model chain:8 --strategy sqrt,fastest", "unknown strategy 'fastest'"},
      {"simulate --model chain:8 --strategy every-k:0", "every-k: K must be between 1 and 1073741824, got 0"},
      {"simulate --model chain:8 --strategy manual:3,9", "manual: checkpoint 9 is out of range 0..7 for model 'chain:8'"},
      {"simulate --model /no/such/model.json", "model '/no/such/model.json' is neither a preset"},
      {"simulate", "--model is required"},
      {"simulate --model chain:8 --bogus", "--bogus"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << " -> " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << " -> " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

TEST(CliSimulate, UnwritableCsvLeavesNoFile) {
  const CliResult r = run_cli("simulate --model chain:8 --csv /nonexistent-dir/t.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot write '/nonexistent-dir/t.csv'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/t.csv"));
}

TEST(CliSimulate, HelpListsEveryStrategy) {
  const CliResult r = run_cli("simulate --help");
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"store-all", "recompute-all", "sqrt", "every-k:K", "manual:I,J,...", "--json", "--csv"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  const CliResult top = run_cli("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* s : {"simulate", "run", "export", "model", "sweep", "explain"}) EXPECT_NE(top.out.find(s), std::string::npos) << s;
}

TEST(CliSimulate, OptimizerAddsTheWholeStep) {
  const CliResult r = run_cli("simulate --model mlp:4:64:8 --strategy store-all,sqrt --optimizer adam --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& step = j["step_memory"];
  const uint64_t params = j["model"]["param_bytes"];
  EXPECT_EQ(step["optimizer"], "adam");
  EXPECT_EQ(step["parameters_bytes"], params);
  EXPECT_EQ(step["parameter_grads_bytes"], params);    // fp32 weights, no buffers
  EXPECT_EQ(step["optimizer_state_bytes"], 2 * params);  // exp_avg and exp_avg_sq
  EXPECT_EQ(step["master_weights_bytes"], 0);
  for (const auto& s : j["strategies"])
    EXPECT_EQ(s["step_total_bytes"].get<uint64_t>(), 4 * params + s["peak_bytes"].get<uint64_t>());

  const CliResult table = run_cli("simulate --model mlp:4:64:8 --strategy store-all --optimizer momentum");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("whole step with momentum"), std::string::npos) << table.out;

  const CliResult bad = run_cli("simulate --model mlp:4:64:8 --optimizer lion");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "remat: error: --optimizer: unknown optimizer 'lion' (expected sgd|momentum|adam|adamw)\n");
  EXPECT_EQ(bad.out, "");
}

TEST(CliSimulate, MicroBatchesSimulateOneMicroBatchAndTabulateK) {
  // K=2 of mlp:4:64:8 is mlp:4:64:4, simulated on its own.
  const CliResult half = run_cli("simulate --model mlp:4:64:4 --strategy store-all,sqrt --json");
  ASSERT_EQ(half.code, 0) << half.err;
  const auto h = nlohmann::json::parse(half.out);

  const CliResult one = run_cli("simulate --model mlp:4:64:8 --strategy store-all,sqrt --micro-batches 2 --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  EXPECT_EQ(j["micro_batches"], 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(j["strategies"][i]["peak_bytes"], h["strategies"][i]["peak_bytes"]);
    EXPECT_DOUBLE_EQ(j["strategies"][i]["step_flops"].get<double>(), 2 * h["strategies"][i]["flops"].get<double>());
  }

  const CliResult table = run_cli("simulate --model mlp:4:64:8 --strategy store-all,sqrt --micro-batches 1,2 --json");
  ASSERT_EQ(table.code, 0) << table.err;
  const auto t = nlohmann::json::parse(table.out)["micro_batch_sweep"];
  ASSERT_EQ(t.size(), 4u);  // K in {1, 2} x two strategies
  EXPECT_EQ(t[2]["micro_batches"], 2);
  EXPECT_EQ(t[2]["batch"], 4);
  EXPECT_EQ(t[2]["peak_bytes"], h["strategies"][0]["peak_bytes"]);

  const CliResult bad = run_cli("simulate --model mlp:4:64:8 --micro-batches 3");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "remat: error: --micro-batches 3: does not divide the batch (8, the first dimension of the input [8,64])\n");
}

// chain:10 with offload:3: device 7, host 3, six one-byte transfers
// (tests/strategies/test_offload.cpp derives them). At 2 bytes/s the copies
// take 3 s in all; the step is compute plus stall.
TEST(CliSimulate, OffloadJsonCarriesHostPeakTimeAndStall) {
  const CliResult r =
      run_cli("simulate --model chain:10 --strategy every-k:3,offload:3 --json --link-bandwidth 2 --device-flops 1T");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["time_model"]["link_bandwidth"], 2.0);
  EXPECT_EQ(j["time_model"]["device_flops"], 1e12);
  const auto& plain = j["strategies"][0];
  const auto& off = j["strategies"][1];
  EXPECT_EQ(plain["peak_bytes"], 8);
  EXPECT_EQ(plain["peak_host_bytes"], 0);
  EXPECT_FALSE(plain.contains("host_timeline"));
  EXPECT_EQ(plain["time"]["stall_s"], 0.0);
  EXPECT_EQ(off["peak_bytes"], 7);
  EXPECT_EQ(off["peak_host_bytes"], 3);
  EXPECT_EQ(off["transfers"], 6);
  EXPECT_EQ(off["transfer_bytes"], 6);
  EXPECT_DOUBLE_EQ(off["time"]["transfer_s"].get<double>(), 3.0);
  // Compute is the same FLOPs (offload recomputes nothing more).
  EXPECT_DOUBLE_EQ(off["time"]["compute_s"].get<double>(), plain["time"]["compute_s"].get<double>());
  // Compute takes nanoseconds here: nearly every copy is waited for.
  EXPECT_GT(off["time"]["stall_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(off["time"]["step_s"].get<double>(),
                   off["time"]["compute_s"].get<double>() + off["time"]["stall_s"].get<double>());
  const auto host = off["host_timeline"].get<std::vector<uint64_t>>();
  EXPECT_EQ(host.size(), off["instructions"].get<std::size_t>());
  EXPECT_EQ(*std::max_element(host.begin(), host.end()), 3u);
}

TEST(CliSimulate, OffloadTableOnlyWhenSomethingMoves) {
  const CliResult plain = run_cli("simulate --model chain:10 --strategy sqrt");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("host tier"), std::string::npos) << plain.out;
  const CliResult r = run_cli("simulate --model chain:10 --strategy every-k:3,offload:3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("host tier, compression and time (device 5e+13 FLOP/s, host link 2.5e+10 bytes/s, device "
                       "memory 2e+12 bytes/s)"),
            std::string::npos)
      << r.out;
  // device peak, host peak, transfers, conversions
  EXPECT_NE(r.out.find("offload:3                             7 B            3 B          6            0"), std::string::npos) << r.out;
  // A compressing strategy gets the table too: chain:7:64 under sqrt+compress:int8
  // (tests/strategies/test_compress.cpp): peak 6 x 64 + 20, four conversions,
  // C(x) and C(a3) of 20 bytes each.
  const CliResult c = run_cli("simulate --model chain:7:64 --strategy sqrt+compress:int8");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("sqrt+compress:int8                  404 B            0 B          0            4           40 B"), std::string::npos) << c.out;
}

TEST(CliSimulate, BadRatesExitTwo) {
  for (const char* flag : {"--link-bandwidth 0", "--device-flops fast", "--link-bandwidth -1G"}) {
    const CliResult r = run_cli(std::string("simulate --model chain:4 --strategy offload ") + flag);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find("must be a positive number"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A name longer than the strategy column widens it: every row's figures end
// where their header ends, in the main, host-tier and whole-step tables.
TEST(CliSimulate, LongStrategyNamesKeepColumnsUnderTheirHeaders) {
  const std::string long_name = "offload+manual:5,10,15,20,25,30,35";
  const CliResult r = run_cli("simulate --model chain:40 --optimizer sgd --strategy store-all," + long_name);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines;
  for (std::size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(r.out.substr(at, nl - at));
  int tables = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("strategy ", 0) != 0) continue;
    ++tables;
    const std::string& header = lines[i];
    // Both rows follow their header, store-all first, and are exactly as long.
    ASSERT_LT(i + 2, lines.size());
    EXPECT_EQ(lines[i + 1].rfind("store-all ", 0), 0u) << lines[i + 1];
    EXPECT_EQ(lines[i + 2].rfind(long_name + " ", 0), 0u) << lines[i + 2];
    EXPECT_EQ(lines[i + 1].size(), header.size()) << header << "\n" << lines[i + 1];
    EXPECT_EQ(lines[i + 2].size(), header.size()) << header << "\n" << lines[i + 2];
    // The first figure starts after the name and the column's one space.
    EXPECT_NE(lines[i + 2][long_name.size()], '\0');
    EXPECT_EQ(lines[i + 2][long_name.size()], ' ');
  }
  EXPECT_EQ(tables, 3) << r.out;  // activations, host tier, whole step
}
