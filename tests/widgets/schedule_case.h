// One strategy's schedule on a preset model with what the window derives from
// it (resident index, facts with the strategy's declared checkpoints), and
// lookups of instructions, for the tests that check node states by hand.
#pragma once
#include <cstddef>
#include <string>

#include "core/io/model_source.h"
#include "core/sim/resident_index.h"
#include "core/strategies/registry.h"
#include "widgets/document/node_states.h"

namespace remat {

// Not copyable: the index points into the model and the schedule.
struct ScheduleCase {
  ScheduleCase(const std::string& modelSpec, const std::string& strategy)
      : model(load_model(modelSpec)),
        schedule(make_strategy(strategy)->schedule(model)),
        index(model, schedule),
        facts(model, schedule, make_strategy(strategy)->declared_checkpoints(model), parse_strategy(strategy)) {}
  ScheduleCase(const ScheduleCase&) = delete;
  ScheduleCase& operator=(const ScheduleCase&) = delete;

  Model model;
  Schedule schedule;
  ResidentIndex index;
  ScheduleFacts facts;

  // The first `ins` at or after `from`; the schedule's length when none.
  std::size_t first(Instr ins, std::size_t from = 0) const {
    for (std::size_t i = from; i < schedule.code.size(); ++i)
      if (schedule.code[i] == ins) return i;
    return schedule.code.size();
  }
  NodeStates states(std::size_t t) const { return node_states_at(model, schedule, index, facts, t); }
};

}  // namespace remat
