// Several strategies simulated on one model: what the CLI's table, the GUI's
// comparison and the exports all start from.
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/sim/instruction_limit.h"
#include "core/sim/schedule.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "core/strategies/strategy.h"

namespace remat {

struct Model;

struct StrategyRun {
  std::string spec;   // as the user wrote it
  std::optional<StrategySpec> parsed;  // the spec, parsed once; empty when it does not parse
  std::string name;   // canonical ("sqrt", "every-k:4")
  Schedule schedule;
  Simulation sim;
  std::vector<SolverRecord> solvers;
  // The checkpoint set the strategy names on this model (Strategy::declared_checkpoints:
  // sqrt, every-k, manual), asked while it was made; the window marks it.
  std::vector<int> declared;  // what the searches behind it proved (optimal, budget)
  std::string error;  // why this strategy does not apply to the model; empty when it does
  // Still being computed elsewhere (the window's background searches); `error`
  // then says what is under way.
  bool pending = false;
  // Not made: its stated length is over the instruction limit; `error` says
  // "too large to simulate (N instructions, ...)".
  bool too_large = false;
  bool ok() const { return error.empty(); }
};

struct SimulateStrategiesOptions {
  InstructionLimit limit;  // per strategy
  bool timelines = true;   // keep each simulation's timeline (8 bytes per instruction)
  std::optional<TimeModel> time;  // predict each step's time (Simulation::time)
};

// Builds and simulates each spec; a spec that fails (bad argument, not
// applicable to this model, longer than the limit) yields a run with `error`
// set, the others go on.
std::vector<StrategyRun> simulate_requests(const Model& model, const std::vector<StrategyRequest>& requests,
                                           const SimulateStrategiesOptions& options = {});
// The same from text, each parsed once (request_strategy).
std::vector<StrategyRun> simulate_strategies(const Model& model, const std::vector<std::string>& specs,
                                             const SimulateStrategiesOptions& options = {});
// One strategy already made from `spec`: its schedule and simulation, or the
// error, as simulate_strategies gives them (`parsed` left to the caller, who
// made the strategy).
StrategyRun simulate_strategy(const Model& model, const Strategy& strategy, const std::string& spec,
                              const SimulateStrategiesOptions& options = {});

// store-all's simulated activation peak: what a budget share ("optimal:50%") is a share of.
uint64_t store_all_peak(const Model& model);
// `specs` with each budget share written as bytes of `model`'s store-all peak
// (registry.h's resolve_budget_shares; store-all is simulated once, and only
// when some spec writes a share).
std::vector<std::string> resolve_budget_shares(const Model& model, std::vector<std::string> specs);

// {"name","ops","activation_bytes","param_bytes","unit_bytes","executable"}
nlohmann::json model_json(const Model& model);
// {"name","peak_bytes","peak_host_bytes","transfers","transfer_bytes",
//  "conversions","compressed_bytes",
//  "forward_steps","backward_steps","recompute_steps","flops","overhead",
//  "note"?,"solvers"?,
//  "time"? {"compute_s","transfer_s","convert_s","stall_s","step_s"} (when predicted),
//  "timeline"?, "host_timeline"? (when something is offloaded)}
nlohmann::json simulation_json(const StrategyRun& run, bool with_timeline = true);
// {"model":{...},"strategies":[...]}: the CLI's --json, the GUI's JSON export.
nlohmann::json comparison_json(const Model& model, const std::vector<StrategyRun>& runs, bool with_timeline = true);
// Long format, one row per instruction: strategy,step,instruction,bytes.
void write_timelines_csv(std::ostream& out, const Model& model, const std::vector<StrategyRun>& runs);

}  // namespace remat
