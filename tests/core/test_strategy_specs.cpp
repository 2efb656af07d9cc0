#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/base/spec_parse.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;

namespace {
std::string error_of(const char* spec, const char* model = "chain:16") {
  return remat::testing::input_error_of([&] { make_strategy(spec)->schedule(make_preset(model)); }, "");
}
}  // namespace

TEST(StrategySpecs, NamesRoundTrip) {
  EXPECT_EQ(make_strategy("sqrt")->name(), "sqrt");
  EXPECT_EQ(make_strategy("every-k:4")->name(), "every-k:4");
  EXPECT_EQ(make_strategy("manual:9,3,3")->name(), "manual:3,9");
}

TEST(StrategySpecs, ListSplittingKeepsManualArguments) {
  EXPECT_EQ(split_strategy_list("store-all,manual:1,2,3,sqrt,every-k:2"),
            (std::vector<std::string>{"store-all", "manual:1,2,3", "sqrt", "every-k:2"}));
}

// 'all' stands for every strategy that takes no argument, wherever it is in
// the list; a spec named twice is kept once, where first named.
TEST(StrategySpecs, AllExpandsInPlaceAndRepeatsAreDropped) {
  std::vector<std::string> argument_free;
  for (const auto& s : strategy_catalog())
    if (s.argument.empty()) argument_free.push_back(s.name);
  EXPECT_EQ(argument_free, (std::vector<std::string>{"store-all", "recompute-all", "sqrt", "auto", "selective"}));
  EXPECT_EQ(expand_strategy_list("all"), argument_free);
  EXPECT_EQ(expand_strategy_list("manual:1,2,all,offload,sqrt,manual:1,2"),
            (std::vector<std::string>{"manual:1,2", "store-all", "recompute-all", "sqrt", "auto", "selective", "offload"}));
  EXPECT_EQ(expand_strategy_list("sqrt,sqrt+compress:bf16"), (std::vector<std::string>{"sqrt", "sqrt+compress:bf16"}));
}

TEST(StrategySpecs, BadSpecsSayWhat) {
  EXPECT_EQ(error_of("every-k:0"), "every-k: K must be between 1 and 1073741824, got 0");
  EXPECT_EQ(error_of("every-k:-2"), "every-k: K must be between 1 and 1073741824, got -2");
  EXPECT_EQ(error_of("every-k"), "strategy 'every-k' needs an argument: every-k:K");
  EXPECT_EQ(error_of("manual:3,40"), "manual: checkpoint 40 is out of range 0..15 for model 'chain:16'");
  EXPECT_EQ(error_of("sqrt:3"), "strategy 'sqrt' takes no argument (got 'sqrt:3')");
  EXPECT_NE(error_of("fastest").find("unknown strategy 'fastest' (known: store-all, recompute-all, sqrt"), std::string::npos);
}

TEST(StrategySpecs, ByteCounts) {
  EXPECT_EQ(parse_bytes("4096", "b"), 4096u);
  EXPECT_EQ(parse_bytes("64K", "b"), 65536u);
  EXPECT_EQ(parse_bytes("1.5M", "b"), 1572864u);
  EXPECT_EQ(parse_bytes("2GiB", "b"), 2147483648u);
  EXPECT_THROW(parse_bytes("12Q", "b"), InputError);
  EXPECT_THROW(parse_bytes("", "b"), InputError);
  EXPECT_THROW(parse_bytes("-5", "b"), InputError);
}
