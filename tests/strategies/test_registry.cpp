// The registry is one table: every entry builds from its own example, its
// name() recreates it, the argument rules follow the table, and the help text
// and the "unknown strategy" message list exactly the table's names.
#include <gtest/gtest.h>

#include <set>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;

namespace {

std::string spec_of(const StrategyInfo& info) {
  return info.argument.empty() ? info.name : info.name + ":" + info.example;
}

std::string error_of(const std::string& spec) {
  return remat::testing::input_error_of([&] { make_strategy(spec); });
}

}  // namespace

TEST(Registry, EveryEntryBuildsRoundTripsAndSchedules) {
  const Model m = make_preset("chain:16");
  std::set<std::string> names;
  for (const StrategyInfo& info : strategy_catalog()) {
    EXPECT_TRUE(names.insert(info.name).second) << "listed twice: " << info.name;
    ASSERT_NE(info.make, nullptr) << info.name;
    EXPECT_FALSE(info.help.empty()) << info.name;
    EXPECT_EQ(info.argument.empty(), info.example.empty()) << info.name << ": an example exactly when it takes an argument";
    // A modifier is built after a base (sqrt+compress:bf16) and named after it.
    const std::string base = info.modify ? "sqrt+" : "";
    const auto s = make_strategy(base + spec_of(info));
    const std::string name = s->name();
    // The canonical name is this entry's, and building from it gives the same strategy.
    EXPECT_EQ(name.substr(base.size(), name.find(':') - base.size()), info.name);
    EXPECT_EQ(make_strategy(name)->name(), name);
    const Schedule sched = s->schedule(m);
    EXPECT_EQ(sched.strategy, name);
    EXPECT_NO_THROW(validate(m, sched)) << name;
  }
  EXPECT_GE(names.size(), 10u);
}

TEST(Registry, ArgumentsFollowTheTable) {
  for (const StrategyInfo& info : strategy_catalog()) {
    if (info.argument.empty()) {
      EXPECT_EQ(error_of(info.name + ":1"), "strategy '" + info.name + "' takes no argument (got '" + info.name + ":1')");
    } else if (info.argument_optional) {
      // The bare name builds the default; an empty argument is still an error.
      EXPECT_EQ(make_strategy(info.name)->name(), info.name);
      EXPECT_EQ(error_of(info.name + ":"), "strategy '" + info.name + "' needs an argument: " + info.name + ":" + info.argument);
    } else {
      const std::string want = "strategy '" + info.name + "' needs an argument: " + info.name + ":" + info.argument;
      EXPECT_EQ(error_of(info.name), want);
      EXPECT_EQ(error_of(info.name + ":"), want);
    }
  }
}

TEST(Registry, HelpAndUnknownNamesListTheTableInOrder) {
  std::string help_expected, known;
  for (const StrategyInfo& info : strategy_catalog()) {
    help_expected += "\n  " + info.name + (info.argument.empty() ? "" : ":" + info.argument) + "  " + info.help;
    known += (known.empty() ? "" : ", ") + info.name;
  }
  // Then what BYTES may be, once for every entry that takes it.
  EXPECT_EQ(strategy_help(),
            help_expected + "\n  BYTES: a byte count (4096, 64K, 1.5M, 2G) or a share of the model's store-all peak (50%)");
  EXPECT_EQ(error_of("fastest"), "unknown strategy 'fastest' (known: " + known + ")");
}

// Non-default arguments survive the round trip too.
TEST(Registry, NamesKeepTheirArguments) {
  EXPECT_EQ(make_strategy("optimal:1K:7")->name(), "optimal:1024:7");
  EXPECT_EQ(make_strategy("optimal:1K")->name(), "optimal:1024");
  EXPECT_EQ(make_strategy("budget:2K")->name(), "budget:2048");
  EXPECT_EQ(make_strategy("manual:9,3,3")->name(), "manual:3,9");
  EXPECT_EQ(make_strategy("revolve:4")->name(), "revolve:4");
}

// "name+SPEC": only a wrapping entry takes another strategy, and names it in full.
TEST(Registry, WrappersTakeAnotherSpec) {
  EXPECT_EQ(make_strategy("offload+revolve:4")->name(), "offload+revolve:4");
  std::string wrappers;
  for (const StrategyInfo& info : strategy_catalog())
    if (info.wrap) wrappers += (wrappers.empty() ? "" : ", ") + info.name + "+SPEC";
  std::string modifiers;
  for (const StrategyInfo& info : strategy_catalog())
    if (info.modify) modifiers += (modifiers.empty() ? "" : ", ") + ("SPEC+" + info.name + ":" + info.argument);
  EXPECT_EQ(modifiers, "SPEC+compress:DTYPE");
  EXPECT_EQ(error_of("sqrt+store-all"),
            "strategy 'sqrt+store-all': only " + wrappers + " wraps another strategy (and " + modifiers + " modifies one)");
  EXPECT_EQ(error_of("offload+"), "strategy 'offload+' needs a strategy after '+': offload+sqrt");
  EXPECT_EQ(error_of("offload+offload:2"), "strategy 'offload+offload:2': offload cannot wrap another offload");
  EXPECT_EQ(error_of("offload+fastest").substr(0, 27), "unknown strategy 'fastest' ");
}
