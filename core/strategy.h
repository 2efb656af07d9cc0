// Strategies: each turns a model into an ordinary schedule, so the simulator,
// executor and GUI need no special cases. Named by specs such as "sqrt",
// "every-k:4" or "manual:3,7,11".
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/schedule.h"

namespace remat {

struct Model;

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The spec that recreates this strategy ("every-k:4").
  virtual std::string name() const = 0;
  // Throws InputError when the strategy cannot apply to this model (e.g. a
  // checkpoint index out of range).
  virtual Schedule schedule(const Model& model) const = 0;
  // The length of schedule(model), stated before it is made
  // (instruction_limit.h refuses the ones that would not fit): exact, or an
  // upper bound for searches; counting may stop once it passes `limit`
  // (Bound::AtLeast). Cheap next to schedule(). Throws as schedule() would.
  virtual ScheduleSize size(const Model& model, uint64_t limit) const = 0;
};

struct StrategyInfo {
  std::string name;      // "every-k"
  std::string argument;  // "K" or "" when it takes none
  std::string help;      // one line for --help
};

// Every strategy the build knows, in the order --help lists them.
const std::vector<StrategyInfo>& strategy_catalog();
// Throws InputError: unknown name, missing or bad argument.
std::unique_ptr<Strategy> make_strategy(std::string_view spec);
// Splits "store-all,manual:1,2,3,sqrt" into specs; bare integers continue the
// argument list of the previous spec (manual's checkpoints use commas too).
std::vector<std::string> split_strategy_list(std::string_view list);

// The checkpoint sets behind the named strategies, for callers (the GUI's
// manual mode) that start from one of them.
std::vector<int> every_k_checkpoints(const Model& model, int k);
int sqrt_interval(const Model& model);

}  // namespace remat
