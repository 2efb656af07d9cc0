// remat explain: why a strategy's peak is where it is — the instruction at the
// peak and the tensors resident there, grouped by why they are held.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "core/analysis/explain.h"
#include "core/strategies/registry.h"

namespace remat::cli {
namespace {

struct ExplainOptions {
  std::string model;
  std::string strategy = "sqrt";
  bool json = false;
  InstructionLimit limit;
};

void run_explain(const ExplainOptions& o) {
  const auto specs = split_strategy_list(o.strategy);
  if (specs.size() != 1) throw InputError("--strategy: explain takes one strategy (got '" + o.strategy + "')");
  (void)make_strategy(resolve_budget_shares(specs.front(), 0));  // a bad spec fails before the model loads
  const Model model = load_model(o.model);
  const auto strategy = make_strategy(resolve_budget_shares(model, specs).front());
  const PeakExplanation e = explain_peak(model, bounded_schedule(*strategy, model, o.limit));
  if (o.json) std::cout << explanation_json(model, e).dump() << "\n";
  else std::cout << explanation_text(model, e);
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto o = std::make_shared<ExplainOptions>();
  auto* cmd = app.add_subcommand("explain", "Explain why a strategy's peak is where it is: the instruction and what is resident");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec or a .json/.onnx file")->required();
  cmd->add_option("-s,--strategy", o->strategy, "One strategy spec (e.g. sqrt, manual:16, revolve:4)")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON {strategy, peak_bytes, peak_index, instruction, groups:[{reason, bytes, ops, names}]}");
  add_max_instructions_option(cmd, o->limit);
  cmd->callback([o] { run_explain(*o); });
}

}  // namespace remat::cli
