// Every strategy the build knows, in one table: its name, argument, help line
// and constructor. The catalog the window lists, the CLI's --help text and
// make_strategy()'s dispatch all read this table, so they cannot disagree.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/strategies/strategy.h"

namespace remat {

struct StrategyInfo {
  std::string name;      // "every-k"
  std::string argument;  // "K", or "" when it takes none
  std::string example;   // an argument it accepts ("4"), for the window's default; "" when it takes none
  std::string help;      // one line for --help
  // Builds the strategy from the text after "name:" (empty when it takes
  // none); throws InputError on a bad argument.
  std::unique_ptr<Strategy> (*make)(const std::string& argument);
  // The bare name is accepted too (make gets ""): offload = offload:ceil(sqrt(n)).
  bool argument_optional = false;
  // Non-null for a strategy that wraps another: "name+SPEC" builds SPEC and
  // hands it over with the whole spec (its name); throws InputError for an
  // inner strategy it cannot wrap.
  std::unique_ptr<Strategy> (*wrap)(std::unique_ptr<Strategy> inner, const std::string& spec) = nullptr;
  // Non-null for a modifier, written after another strategy: "SPEC+name:ARG"
  // (sqrt+compress:bf16) builds SPEC and changes its schedule; `argument` is
  // the text after "name:". Alone (make), a modifier is an InputError.
  std::unique_ptr<Strategy> (*modify)(std::unique_ptr<Strategy> base, const std::string& argument,
                                      const std::string& spec) = nullptr;
};

// The table, in the order --help lists it.
const std::vector<StrategyInfo>& strategy_catalog();
// "\n  name:ARG  help" per entry: the --strategy option's help text.
std::string strategy_help();
// Throws InputError: unknown name, missing or bad argument, a "+" after a
// name that wraps nothing, a modifier without a base or given twice.
std::unique_ptr<Strategy> make_strategy(std::string_view spec);
// Splits "store-all,manual:1,2,3,sqrt" into specs; bare integers continue the
// argument list of the previous spec (manual's checkpoints use commas too), and
// so does an integer followed by a modifier ("manual:1,2+compress:bf16").
std::vector<std::string> split_strategy_list(std::string_view list);
// split_strategy_list, with 'all' anywhere standing for every strategy that
// takes no argument ("all,offload"); each spec once, in the order first named.
std::vector<std::string> expand_strategy_list(std::string_view list);

}  // namespace remat
