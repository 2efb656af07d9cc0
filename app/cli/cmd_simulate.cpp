// remat simulate: predicted memory and compute of each strategy on a model.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "core/atomic_file.h"
#include "core/comparison.h"
#include "core/errors.h"
#include "core/model_source.h"
#include "core/strategy.h"

namespace remat::cli {
namespace {

struct SimulateOptions {
  std::string model;
  std::string strategies = "store-all,recompute-all,sqrt";
  bool json = false;
  std::string csv;
};

void print_table(const Model& model, const std::vector<StrategyRun>& runs) {
  const uint64_t unit = model.uniform_bytes();
  std::printf("model %s: %d ops, %s of parameters, %s saved for backward\n", model.name.c_str(), model.size(),
              format_bytes(model.param_bytes()).c_str(), format_bytes(model.saved_bytes()).c_str());
  std::printf("%-22s %14s %9s %10s %11s %9s %9s\n", "strategy", "peak", unit ? "tensors" : "", "fwd steps",
              "recomputed", "bwd steps", "overhead");
  for (const auto& r : runs) {
    const Simulation& s = r.sim;
    std::string tensors = unit ? std::to_string(s.peak_bytes / unit) : "";
    std::printf("%-22s %14s %9s %10lld %11lld %9lld %8.1f%%\n", r.name.c_str(), format_bytes(s.peak_bytes).c_str(),
                tensors.c_str(), static_cast<long long>(s.forward_steps), static_cast<long long>(s.recompute_steps),
                static_cast<long long>(s.backward_steps), 100.0 * s.overhead);
  }
  for (const auto& r : runs)
    if (!r.schedule.note.empty()) std::printf("note: %s: %s\n", r.name.c_str(), r.schedule.note.c_str());
}

void run_simulate(const SimulateOptions& o) {
  const Model model = load_model(o.model);
  const auto specs = split_strategy_list(o.strategies);
  for (const auto& spec : specs) (void)make_strategy(spec);  // reject bad names before any work
  const auto runs = simulate_strategies(model, specs);
  for (const auto& r : runs) {
    if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
  }
  if (!o.csv.empty()) write_file_atomically(o.csv, [&](std::ostream& out) { write_timelines_csv(out, model, runs); });
  if (o.json) std::cout << comparison_json(model, runs).dump() << "\n";
  else print_table(model, runs);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand("simulate", "Predict the memory timeline, peak and recomputation of strategies");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16, mlp:8:1024:64, transformer:12, gpt:12, resnet:18) or a .json/.onnx file")
      ->required();
  std::string names;
  for (const auto& s : strategy_catalog()) names += "\n  " + s.name + (s.argument.empty() ? "" : ":" + s.argument) + "  " + s.help;
  cmd->add_option("-s,--strategy", o->strategies, "Comma-separated strategies (default: store-all,recompute-all,sqrt):" + names)
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON {model: {..., saved_bytes}, strategies:[{name, peak_bytes, ..., timeline}]} instead of a table");
  cmd->add_option("--csv", o->csv, "Also write the timelines (bytes per instruction) to this CSV file");
  cmd->callback([o] { run_simulate(*o); });
}

}  // namespace remat::cli
