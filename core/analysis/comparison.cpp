#include "core/analysis/comparison.h"

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/strategies/registry.h"

namespace remat {

namespace {

// Schedules and simulates `run` (its spec and name set), errors in the run.
void schedule_and_simulate(const Model& model, const Strategy& strategy, const SimulateStrategiesOptions& options,
                           StrategyRun& run) {
  try {
    run.schedule = bounded_schedule(strategy, model, options.limit, &run.solvers);
    run.declared = strategy.declared_checkpoints(model);
    run.sim = simulate(model, run.schedule,
                       {.timeline = options.timelines, .time = options.time ? &*options.time : nullptr});
  } catch (const ScheduleTooLarge& e) {
    run.error = e.what();
    run.too_large = true;
  } catch (const std::exception& e) {
    run.error = e.what();
  }
}

}  // namespace

std::vector<StrategyRun> simulate_requests(const Model& model, const std::vector<StrategyRequest>& requests,
                                           const SimulateStrategiesOptions& options) {
  std::vector<StrategyRun> runs;
  for (const StrategyRequest& request : requests) {
    StrategyRun run;
    run.spec = run.name = request.text;
    run.parsed = request.spec;
    run.error = request.error;
    std::unique_ptr<Strategy> strategy;
    if (request.spec) {
      try {
        strategy = make_strategy(*request.spec);
        run.name = strategy->name();
      } catch (const std::exception& e) {
        run.error = e.what();
      }
    }
    if (strategy) schedule_and_simulate(model, *strategy, options, run);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::vector<StrategyRun> simulate_strategies(const Model& model, const std::vector<std::string>& specs,
                                             const SimulateStrategiesOptions& options) {
  std::vector<StrategyRequest> requests;
  for (const std::string& spec : specs) requests.push_back(request_strategy(spec));
  return simulate_requests(model, requests, options);
}

StrategyRun simulate_strategy(const Model& model, const Strategy& strategy, const std::string& spec,
                              const SimulateStrategiesOptions& options) {
  StrategyRun run;
  run.spec = spec;
  run.name = strategy.name();

  schedule_and_simulate(model, strategy, options, run);
  return run;
}

uint64_t store_all_peak(const Model& model) {
  return simulate(model, make_strategy("store-all")->schedule(model), {.timeline = false}).peak_bytes;
}

std::vector<std::string> resolve_budget_shares(const Model& model, std::vector<std::string> specs) {
  std::optional<uint64_t> reference;
  for (std::string& spec : specs) {
    if (!has_budget_share(spec)) continue;
    if (!reference) reference = store_all_peak(model);
    spec = resolve_budget_shares(spec, *reference);
  }
  return specs;
}

nlohmann::json model_json(const Model& model) {
  uint64_t act = 0, aux = 0;
  for (int v = 0; v < model.size(); ++v) {
    act += model.op(v).bytes;
    aux += model.op(v).aux_bytes;
  }
  return {{"name", model.name},
          {"ops", model.size()},
          {"activation_bytes", act},
          {"aux_bytes", aux},
          {"saved_bytes", model.saved_bytes()},
          {"param_bytes", model.param_bytes()},
          {"unit_bytes", model.uniform_bytes()},
          {"forward_flops", model.forward_flops()},
          {"backward_flops", model.backward_flops()},
          {"executable", model.executable()}};
}

nlohmann::json simulation_json(const StrategyRun& run, bool with_timeline) {
  nlohmann::json j = {{"name", run.name}};
  if (!run.ok()) {
    j["error"] = run.error;
    return j;
  }
  const Simulation& s = run.sim;
  j.update({{"peak_bytes", s.peak_bytes},
            {"peak_instruction", s.peak_index},
            {"peak_host_bytes", s.peak_host_bytes},
            {"transfers", s.transfers},
            {"transfer_bytes", s.transfer_bytes},
            {"conversions", s.conversions},
            {"compressed_bytes", s.compressed_bytes},
            {"instructions", run.schedule.code.size()},
            {"forward_steps", s.forward_steps},
            {"backward_steps", s.backward_steps},
            {"recompute_steps", s.recompute_steps},
            {"flops", s.flops},
            {"recompute_flops", s.recompute_flops},
            {"overhead", s.overhead}});
  if (!run.schedule.note.empty()) j["note"] = run.schedule.note;
  if (!run.solvers.empty()) {
    j["solvers"] = nlohmann::json::array();
    for (const SolverRecord& r : run.solvers) {
      nlohmann::json e{{"solver", r.solver}, {"family", r.family}, {"status", r.status}, {"chosen", r.chosen},
                       {"seconds", r.seconds}};
      if (r.recompute_flops >= 0) e["recompute_flops"] = r.recompute_flops;
      if (r.bound >= 0) e["bound"] = r.bound;
      if (r.gap >= 0) e["gap"] = r.gap;
      if (r.step_gap >= 0) e["step_gap"] = r.step_gap;
      if (r.ratio >= 0) e["ratio"] = r.ratio;
      if (r.overhead >= 0) e["overhead"] = r.overhead;
      if (r.bound_overhead >= 0) e["bound_overhead"] = r.bound_overhead;
      if (!r.detail.empty()) e["detail"] = r.detail;
      j["solvers"].push_back(e);
    }
  }
  if (s.time.predicted)
    j["time"] = {{"compute_s", s.time.compute_s},
                 {"transfer_s", s.time.transfer_s},
                 {"convert_s", s.time.convert_s},
                 {"stall_s", s.time.stall_s},
                 {"step_s", s.time.step_s}};
  if (with_timeline) j["timeline"] = s.timeline;
  if (with_timeline && !s.host_timeline.empty()) j["host_timeline"] = s.host_timeline;
  return j;
}

nlohmann::json comparison_json(const Model& model, const std::vector<StrategyRun>& runs, bool with_timeline) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : runs) list.push_back(simulation_json(r, with_timeline));
  return {{"model", model_json(model)}, {"strategies", list}};
}

void write_timelines_csv(std::ostream& out, const Model& model, const std::vector<StrategyRun>& runs) {
  out << "strategy,step,instruction,bytes\n";
  for (const auto& r : runs) {
    if (!r.ok()) continue;
    for (std::size_t i = 0; i < r.schedule.code.size(); ++i)
      out << '"' << r.name << "\"," << i << ',' << to_string(r.schedule.code[i], model) << ',' << r.sim.timeline[i] << '\n';
  }
}

}  // namespace remat
