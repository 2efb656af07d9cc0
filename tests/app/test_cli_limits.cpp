// The instruction limit as a user meets it: a strategy whose schedule would be
// too long is refused before anything is made, with one line naming its
// length, the memory it would take and the flag; the sweep leaves it out with
// a note.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "tests/support/text_files.h"

namespace {

using remat::testing::count_lines;

// recompute-all on chain:N: N(N+1)/2 forward steps, N backward, a free per
// forward, for the input and per gradient but the loss's.
uint64_t recompute_all_chain(uint64_t N) {
  const uint64_t fwd = N * (N + 1) / 2;
  return fwd + N + (fwd + 1) + (N - 1);
}

}  // namespace

TEST(CliLimits, RefusalIsOneLineWithTheLengthAndExit2) {
  const uint64_t n = recompute_all_chain(3000);  // 9,009,000
  const CliResult r = run_cli("simulate --model chain:3000 --strategy store-all,recompute-all --max-instructions 1000000");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  // 9,009,000 instructions at 16 bytes: 144,144,000 bytes, 137.5 MiB.
  EXPECT_EQ(r.err, "remat: error: strategy 'recompute-all': too large to simulate (" + std::to_string(n) +
                       " instructions, about 137.5 MiB; the limit is 1000000 instructions: --max-instructions N "
                       "changes it)\n");
}

TEST(CliLimits, TheLimitIsInclusive) {
  const uint64_t n = recompute_all_chain(100);
  EXPECT_EQ(run_cli("simulate --model chain:100 --strategy recompute-all --max-instructions " + std::to_string(n - 1)).code, 2);
  const CliResult r = run_cli("simulate --model chain:100 --strategy recompute-all --json --max-instructions " + std::to_string(n));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["strategies"][0]["instructions"], n);
}

TEST(CliLimits, TheDefaultRefusesWhatNoMemoryHolds) {
  // 4·10^10 instructions: hundreds of gigabytes at any constant.
  const CliResult r = run_cli("simulate --model chain:200000 --strategy recompute-all");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("remat: error: strategy 'recompute-all': too large to simulate (" +
                            std::to_string(recompute_all_chain(200000)) + " instructions, about ",
                        0),
            0u)
      << r.err;
}

TEST(CliLimits, EveryCommandThatMakesSchedulesTakesTheFlag) {
  for (const char* args : {"explain --model chain:100 --strategy recompute-all --max-instructions 100",
                           "run --model chain:8:16 --strategy recompute-all --backend cpu --max-instructions 10",
                           "simulate --model chain:8 --max-instructions 0", "simulate --model chain:8 --max-instructions lots"}) {
    SCOPED_TRACE(args);
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliLimits, SweepLeavesATooLargeStrategyOutWithANote) {
  // chain:200: recompute-all 40,600 instructions; the others at most a few thousand.
  const uint64_t n = recompute_all_chain(200);
  const CliResult r = run_cli("sweep --model chain:200 --json --max-instructions " + std::to_string(n - 1));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& s : j["strategies"]) EXPECT_NE(s["spec"], "recompute-all");
  ASSERT_EQ(j["notes"].size(), 1u) << j.dump();
  EXPECT_EQ(j["notes"][0].get<std::string>().rfind("recompute-all left out: too large to simulate (" + std::to_string(n) +
                                                       " instructions",
                                                   0),
            0u)
      << j["notes"];
  // The automatic budgets start at the least peak left, revolve:2's: the last
  // budget is store-all's peak and every budget is feasible.
  for (const auto& b : j["budgets"]) EXPECT_TRUE(b["feasible"].get<bool>()) << b.dump();
  const CliResult table = run_cli("sweep --model chain:200 --max-instructions " + std::to_string(n - 1));
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("note: recompute-all left out: too large to simulate"), std::string::npos) << table.out;
  // With room for it, no note.
  const CliResult all = run_cli("sweep --model chain:200 --json --max-instructions " + std::to_string(n));
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_FALSE(nlohmann::json::parse(all.out).contains("notes"));
}
