// remat sweep / remat explain / the new strategy specs, through the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "core/model/presets.h"
#include "core/strategies/registry.h"
#include "tests/app/cli_runner.h"

TEST(CliSweep, JsonFrontIsMonotone) {
  const CliResult r = run_cli("sweep --model chain:24 --budgets auto --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // Twelve even steps plus the named strategies' peaks not already among them.
  std::set<uint64_t> budgets, named;
  for (const auto& b : j["budgets"]) budgets.insert(b["budget_bytes"].get<uint64_t>());
  for (const auto& s : j["strategies"]) named.insert(s["peak_bytes"].get<uint64_t>());
  EXPECT_TRUE(std::includes(budgets.begin(), budgets.end(), named.begin(), named.end()));
  EXPECT_GE(budgets.size(), 12u);
  EXPECT_EQ(budgets.size(), j["budgets"].size());
  double prev = 1e300;
  for (const auto& b : j["budgets"]) {
    ASSERT_TRUE(b["feasible"].get<bool>());
    EXPECT_LE(b["peak_bytes"].get<uint64_t>(), b["budget_bytes"].get<uint64_t>());
    EXPECT_LE(b["overhead"].get<double>(), prev);
    prev = b["overhead"].get<double>();
  }
  EXPECT_FALSE(j["strategies"].empty());
}

// --compress: every point with compressed checkpoints at their stored size.
// chain:7:64 under sqrt+compress:int8 peaks at 6 whole 64-byte tensors and
// C(x) of 16 one-byte codes and a 4-byte scale, and makes C(x) and C(a3)
// (tests/strategies/test_compress.cpp derives it).
TEST(CliSweep, CompressTakesEveryPointToTheStoredSize) {
  const CliResult r = run_cli("sweep --model chain:7:64 --budgets 404,576 --compress int8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["compress"], "int8");
  bool sqrt = false;
  for (const auto& s : j["strategies"]) {
    EXPECT_TRUE(s["spec"].get<std::string>().ends_with("+compress:int8")) << s["spec"];
    if (s["spec"] == "sqrt+compress:int8") {
      sqrt = true;
      EXPECT_EQ(s["peak_bytes"], 6 * 64 + 16 + 4);
      EXPECT_EQ(s["compressed_bytes"], 2 * (16 + 4));
    }
  }
  EXPECT_TRUE(sqrt);
  ASSERT_EQ(j["budgets"].size(), 2u);
  for (const auto& b : j["budgets"]) {
    ASSERT_TRUE(b["feasible"].get<bool>()) << b;
    EXPECT_TRUE(b["spec"].get<std::string>().ends_with("+compress:int8")) << b;
    EXPECT_LE(b["peak_bytes"].get<uint64_t>(), b["budget_bytes"].get<uint64_t>());
  }
  const CliResult t = run_cli("sweep --model chain:7:64 --budgets 404 --compress int8");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("checkpoints compressed to int8"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("compressed"), std::string::npos);
  // sqrt's row: its peak, then what its compressed copies hold.
  const auto row = t.out.find("sqrt+compress:int8");
  ASSERT_NE(row, std::string::npos) << t.out;
  const std::string line = t.out.substr(t.out.rfind('\n', row) + 1, row - t.out.rfind('\n', row) - 1);
  EXPECT_NE(line.find(" 404 B "), std::string::npos) << line;
  EXPECT_NE(line.find(" 40 B "), std::string::npos) << line;
  EXPECT_LT(line.find(" 404 B "), line.find(" 40 B ")) << line;
  const CliResult bad = run_cli("sweep --model chain:7:64 --compress fp8");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  EXPECT_NE(bad.err.find("--compress: unknown compression type 'fp8' (known: bf16, f16, int8)"), std::string::npos)
      << bad.err;
}

// A search cut off by its time limit says so in the table and the JSON.
TEST(CliSimulate, OptimalOutOfTimeSaysSo) {
  const CliResult t = run_cli("simulate --model transformer:12:16:4:2 --strategy optimal:18176:1");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("note: optimal:18176:1: the "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("stopped at its time limit (1 s)"), std::string::npos) << t.out;
  const CliResult j = run_cli("simulate --model transformer:12:16:4:2 --strategy optimal:18176:1 --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_NE(doc["strategies"][0]["note"].get<std::string>().find("not proven"), std::string::npos);
}

TEST(CliSweep, BadBudgetsAndPlot) {
  CliResult r = run_cli("sweep --model chain:8 --budgets 1K,many");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--budgets: budget"), std::string::npos) << r.err;
#ifndef REMAT_CLI_HAS_GUI
  r = run_cli("sweep --model chain:8 --plot " + temp_path("s.png"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--plot needs the GUI build"), std::string::npos) << r.err;
#else
  const std::string png = temp_path("sweep.png");
  r = run_cli("sweep --model chain:8 --plot " + png);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
#endif
}

TEST(CliExplain, LastLayerLesson) {
  const CliResult r = run_cli("explain --model mlp:8 --strategy manual:16 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const CliResult s = run_cli("simulate --model mlp:8 --strategy store-all --json");
  const auto sj = nlohmann::json::parse(s.out);
  // Store-all's peak less the last ReLU's output (op 16): its backward reads
  // only that output, so it runs before the recomputation, as PyTorch's
  // checkpointing does (docs/memory-model.md, "When a phase recomputes").
  const uint64_t peak = sj["strategies"][0]["peak_bytes"].get<uint64_t>() - remat::make_preset("mlp:8").op(16).bytes;
  EXPECT_EQ(j["peak_bytes"].get<uint64_t>(), peak);
  bool recomputed = false;
  for (const auto& g : j["groups"]) recomputed |= g["reason"] == "being recomputed";
  EXPECT_TRUE(recomputed);
  const CliResult t = run_cli("explain --model mlp:8 --strategy manual:16");
  EXPECT_NE(t.out.find("peak " + std::to_string(peak) + " bytes"),
            std::string::npos)
      << t.out;
}

TEST(CliStrategies, ChainOnlyStrategiesRefuseDags) {
  const CliResult r = run_cli("simulate --model transformer:1 --strategy revolve:3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("revolve needs a chain"), std::string::npos) << r.err;
  const CliResult b = run_cli("simulate --model chain:16 --strategy budget:3");
  EXPECT_EQ(b.code, 2);
  // The budget it names is the least that works.
  const std::string key = "smallest feasible budget is ";
  const auto at = b.err.find(key);
  ASSERT_NE(at, std::string::npos) << b.err;
  const long least = std::stol(b.err.substr(at + key.size()));
  EXPECT_EQ(run_cli("simulate --model chain:16 --strategy budget:" + std::to_string(least)).code, 0);
  EXPECT_EQ(run_cli("simulate --model chain:16 --strategy budget:" + std::to_string(least - 1)).code, 2);
}

// The --strategy help of simulate and run is the registry's table, line for line.
TEST(CliStrategies, HelpListsEveryRegisteredStrategy) {
  for (const char* cmd : {"simulate --help", "run --help"}) {
    const CliResult r = run_cli(cmd);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const remat::StrategyInfo& info : remat::strategy_catalog()) {
      const std::string line = info.name + (info.argument.empty() ? "" : ":" + info.argument) + "  " + info.help + "\n";
      EXPECT_NE(r.out.find(line), std::string::npos) << cmd << " lacks: " << line;
    }
  }
}

// A budget written as a share ("optimal:50%") is that share of the model's
// store-all peak, in every command that takes a strategy or budget: the same
// strategies, peaks and fronts as the byte counts it stands for.
TEST(CliStrategies, BudgetSharesAreOfStoreAllsPeak) {
  const std::string model = "--model transformer:4:16:4:2";
  const CliResult s = run_cli("simulate " + model + " --strategy store-all --json");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto peak = nlohmann::json::parse(s.out)["strategies"][0]["peak_bytes"].get<uint64_t>();
  ASSERT_EQ(peak % 4, 0u) << "a model whose shares below are whole bytes";
  const std::string half = std::to_string(peak / 2), quarter = std::to_string(peak / 4);
  const auto figures = [](const std::string& out) {
    std::vector<std::pair<std::string, uint64_t>> f;
    const auto j = nlohmann::json::parse(out);
    for (const auto& r : j["strategies"]) f.emplace_back(r["name"], r["peak_bytes"]);
    return f;
  };
  const CliResult shares = run_cli("simulate " + model + " --strategy optimal:50%,dtr:25%:lru,offload+every-k:2 --json");
  const CliResult bytes =
      run_cli("simulate " + model + " --strategy optimal:" + half + ",dtr:" + quarter + ":lru,offload+every-k:2 --json");
  ASSERT_EQ(shares.code, 0) << shares.err;
  ASSERT_EQ(bytes.code, 0) << bytes.err;
  const auto got = figures(shares.out);
  EXPECT_EQ(got, figures(bytes.out));
  EXPECT_EQ(got.at(0).first, "optimal:" + half);

  const CliResult e = run_cli("explain " + model + " --strategy dtr:25%:lru --json");
  const CliResult eb = run_cli("explain " + model + " --strategy dtr:" + quarter + ":lru --json");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, eb.out);

  const CliResult w = run_cli("sweep " + model + " --budgets 50%,100% --json");
  const CliResult wb = run_cli("sweep " + model + " --budgets " + half + "," + std::to_string(peak) + " --json");
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(w.out, wb.out);

  for (const std::string args : {"simulate " + model + " --strategy optimal:half%",
                                 "simulate " + model + " --strategy sqrt,dtr:-3%",
                                 "sweep " + model + " --budgets 50%,x%",
                                 "explain " + model + " --strategy optimal:5%%",
                                 "simulate " + model + " --strategy optimal:50% --parallel pp=2"}) {
    SCOPED_TRACE(args);
    const CliResult bad = run_cli(args);
    EXPECT_EQ(bad.code, 2);
    EXPECT_EQ(bad.out, "");
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_TRUE(bad.err.find("share of store-all's peak like 50%") != std::string::npos ||
                bad.err.find("with --parallel, give budgets in bytes") != std::string::npos)
        << bad.err;
  }
}
