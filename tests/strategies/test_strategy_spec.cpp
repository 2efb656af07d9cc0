// StrategySpec: the registry parses a spec once into a value, prints it back
// canonically and builds from it; every catalog entry round-trips through
// parse/print/make, equal specs are the same strategy however they were
// written, and the builders code uses (the sweep, the window) check what a
// parsed text would. Nothing here registers a strategy: it reads the table.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;

namespace {

std::string example_of(const StrategyInfo& info) {
  const std::string own = info.argument.empty() ? info.name : info.name + ":" + info.example;
  return info.modify ? "sqrt+" + own : own;  // a modifier is written after a base
}

std::string parse_error(const std::string& text) {
  return remat::testing::input_error_of([&] { parse_strategy(text); });
}

}  // namespace

TEST(StrategySpec, EveryCatalogEntryRoundTripsThroughParsePrintAndMake) {
  for (const StrategyInfo& info : strategy_catalog()) {
    SCOPED_TRACE(info.name);
    const StrategySpec spec = parse_strategy(example_of(info));
    EXPECT_EQ(info.modify ? spec.modifier : spec.name, info.name);
    EXPECT_EQ(parse_strategy(spec.str()), spec);
    EXPECT_EQ(parse_strategy(spec.str()).str(), spec.str());
    // The strategy made from the value names itself by the value's text.
    EXPECT_EQ(make_strategy(spec)->name(), spec.str());
    // The catalog says which strategies decide while the step runs (the run
    // session asks it, so as not to make every strategy twice): exactly those
    // play live, the others refuse.
    {
      const Model chain = make_preset("chain:6:1024");
      ResidentSet held(chain);
      const LiveRun live{[&](Instr i) { held.apply(chain, i); }, [&] { return held.bytes; }};
      if (info.decides_live) EXPECT_NO_THROW(make_strategy(spec)->play_live(chain, live));
      else EXPECT_THROW(make_strategy(spec)->play_live(chain, live), std::logic_error);
    }
    EXPECT_EQ(&strategy_info(spec), info.modify ? find_strategy("sqrt") : &info);
    // One parameter value per parameter given, at most as many as the entry has
    // (a list of op ids is one parameter of any length).
    if (info.params.empty()) EXPECT_TRUE(spec.parameters.empty());
    else if (info.params.front().kind != ParamKind::OpIds) EXPECT_LE(spec.parameters.size(), info.params.size());
    // Each entry's colour is its own (the palette is the table's, not a position's).
    EXPECT_NE(info.color, 0x777777u);
  }
}

TEST(StrategySpec, EqualSpecsAreOneStrategyHoweverWritten) {
  EXPECT_EQ(parse_strategy("budget:1K"), parse_strategy("budget:1024"));
  EXPECT_EQ(parse_strategy("budget:1K").str(), "budget:1024");
  EXPECT_EQ(parse_strategy("manual:9,3,3"), parse_strategy("manual:3,9"));
  EXPECT_EQ(parse_strategy("manual:9,3,3").parameters, (std::vector<int64_t>{3, 9}));
  // optimal's default time limit is left out of its text, as its name() does.
  EXPECT_EQ(parse_strategy("optimal:1K:5").str(), "optimal:1024");
  EXPECT_EQ(parse_strategy("optimal:1K:7").parameters, (std::vector<int64_t>{1024, 7}));
  EXPECT_NE(parse_strategy("every-k:4"), parse_strategy("every-k:5"));
  EXPECT_NE(parse_strategy("offload"), parse_strategy("offload+sqrt"));  // one schedule, two spellings
  EXPECT_NE(parse_strategy("sqrt"), parse_strategy("sqrt+compress:bf16"));
}

TEST(StrategySpec, WrappersAndModifiersAreParts) {
  const StrategySpec off = parse_strategy("offload+revolve:4+compress:int8");
  EXPECT_EQ(off.name, "offload");
  EXPECT_TRUE(off.parameters.empty());
  ASSERT_EQ(off.inner.size(), 1u);
  EXPECT_EQ(off.inner.front(), parse_strategy("revolve:4"));
  EXPECT_EQ(off.modifier, "compress");
  EXPECT_EQ(off.modifier_argument, "int8");
  EXPECT_EQ(off.unmodified().str(), "offload+revolve:4");
  EXPECT_EQ(&innermost_info(off), find_strategy("revolve"));
  EXPECT_EQ(off.str(), "offload+revolve:4+compress:int8");
  EXPECT_EQ(make_strategy(off)->name(), off.str());
  EXPECT_EQ(parse_strategy("offload:3").parameters, (std::vector<int64_t>{3}));
  EXPECT_EQ(parameter_text(parse_strategy("manual:7,2")), "2,7");
  EXPECT_EQ(parameter_text(parse_strategy("optimal:2K:9")), "2048:9");
}

TEST(StrategySpec, BuildersCheckAsTheParserDoes) {
  EXPECT_EQ(strategy_spec("every-k", {4}), parse_strategy("every-k:4"));
  EXPECT_EQ(strategy_spec("manual", {5, 1, 5}).str(), "manual:1,5");
  EXPECT_EQ(strategy_spec("optimal", {4096, 5}).str(), "optimal:4096");
  EXPECT_EQ(wrapped_spec("offload", strategy_spec("budget", {9})).str(), "offload+budget:9");
  EXPECT_EQ(modified_spec(strategy_spec("sqrt"), "compress", "f16").str(), "sqrt+compress:f16");
  const auto error_of = [](auto build) { return remat::testing::input_error_of(build); };
  EXPECT_EQ(error_of([] { strategy_spec("every-k", {0}); }), "every-k: K must be between 1 and 1073741824, got 0");
  EXPECT_EQ(error_of([] { strategy_spec("every-k"); }), "strategy 'every-k' needs an argument: every-k:K");
  EXPECT_EQ(error_of([] { wrapped_spec("offload", strategy_spec("offload", {2})); }),
            "strategy 'offload+offload:2': offload cannot wrap another offload");
  EXPECT_EQ(error_of([] { modified_spec(strategy_spec("sqrt"), "compress", "fp8"); }),
            "strategy 'sqrt+compress:fp8': unknown compression type 'fp8' (known: bf16, f16, int8)");
  EXPECT_EQ(parse_error("optimal:1K:5:5"), "optimal: expected optimal:BYTES[:SECONDS] (got 'optimal:1K:5:5')");
  EXPECT_EQ(parse_error("every-k:4:5"), "every-k: K must be an integer, got '4:5'");
}

// What the graph rings: the checkpoint set the strategy itself names, from
// the strategy (no second parser of sqrt/every-k/manual in the window).
TEST(StrategySpec, DeclaredCheckpointsComeFromTheStrategy) {
  const Model m = make_preset("chain:16");
  EXPECT_EQ(make_strategy("sqrt")->declared_checkpoints(m),
            cut_checkpoints(m, every_k_boundaries(m, sqrt_interval(m))));
  EXPECT_EQ(make_strategy("every-k:3")->declared_checkpoints(m), cut_checkpoints(m, every_k_boundaries(m, 3)));
  EXPECT_EQ(make_strategy("manual:7,2")->declared_checkpoints(m), (std::vector<int>{2, 7}));
  EXPECT_TRUE(make_strategy("store-all")->declared_checkpoints(m).empty());
  EXPECT_TRUE(make_strategy("offload:4")->declared_checkpoints(m).empty());
}

// A budget written as a share of store-all's peak ("optimal:50%") is text
// resolved against a model before it is parsed: each Bytes parameter that
// ends in '%' (a wrapper's inner one too) becomes round(share × peak) bytes,
// nothing else changes, and a share that is not a number >= 0 is refused
// naming the parameter.
TEST(StrategySpec, BudgetSharesResolveAgainstAReference) {
  EXPECT_TRUE(has_budget_share("optimal:50%"));
  EXPECT_TRUE(has_budget_share("offload+budget:25%"));
  EXPECT_TRUE(has_budget_share("dtr:30%:lru+compress:bf16"));
  EXPECT_FALSE(has_budget_share("optimal:1M:5"));
  EXPECT_FALSE(has_budget_share("manual:1,2"));
  EXPECT_FALSE(has_budget_share("sqrt+compress:bf16"));
  EXPECT_EQ(resolve_budget_shares("optimal:50%", 1000), "optimal:500");
  EXPECT_EQ(resolve_budget_shares("optimal:12.5%:9", 1000), "optimal:125:9");  // the seconds stay
  EXPECT_EQ(resolve_budget_shares("dtr:33%:lru+compress:bf16", 1000), "dtr:330:lru+compress:bf16");
  EXPECT_EQ(resolve_budget_shares("offload+budget:25%", 1001), "offload+budget:250");  // 250.25 rounds down
  EXPECT_EQ(resolve_budget_shares("offload+budget:25%", 1002), "offload+budget:251");  // 250.5 rounds away
  EXPECT_EQ(resolve_budget_shares("every-k:4", 1000), "every-k:4");
  EXPECT_EQ(resolve_budget_shares("optimal:150%", 1000), "optimal:1500");  // more than store-all is a budget too
  EXPECT_EQ(parse_budget("64K", "b", 10), 65536u);
  EXPECT_EQ(parse_budget("10%", "b", 4096), 410u);
  const std::string want = "optimal: BYTES must be a byte count like 4096, 64K, 1.5M or 2G, or a share of store-all's "
                           "peak like 50%, got '";
  for (const std::string bad : {"x%", "-5%", "%", "1e3%", "5%%", "nan%"})
    EXPECT_EQ(remat::testing::input_error_of([&] { resolve_budget_shares("optimal:" + bad, 1000); }),
              want + bad + "'")
        << bad;
  // Unresolved, a share is no byte count: the parser says what it wants.
  EXPECT_EQ(parse_error("optimal:50%"), "optimal: BYTES must be a byte count like 4096, 64K, 1.5M or 2G, got '50%'");
}
