// remat model: what a model holds (ops per kind, activation and parameter
// bytes, simulate-only ops), and conversion to JSON or Graphviz.
#include <cstdio>
#include <map>
#include <memory>

#include "app/cli/commands.h"
#include "core/base/errors.h"
#include "core/exec/run_check.h"
#include "core/io/graphviz.h"
#include "core/io/onnx_model.h"
#include "core/io/model_source.h"
#include "core/model/op_rules.h"
#include "core/analysis/step_memory.h"

namespace remat::cli {
namespace {

struct ModelOptions {
  std::string model;
  std::string write;
  std::string dot;
  std::string optimizer;  // empty: no whole-step line
};

void print_summary(const Model& m) {
  std::map<std::string_view, int> kinds;
  uint64_t act = 0, largest = 0, aux = 0;
  int views = 0;
  // Names of the first simulate-only ops (all that is printed) and how many.
  std::vector<std::string_view> sim_only;
  std::size_t sim_only_count = 0;
  constexpr std::size_t kNamesShown = 20;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    ++kinds[kind_name(op.kind)];
    act += op.bytes;
    aux += op.aux_bytes;
    views += op.view;
    largest = std::max(largest, op.bytes);
  }
  const std::vector<RunBlocker> blockers = run_blockers(m);
  for (const RunBlocker& b : blockers)
    if (b.simulate_only && sim_only_count++ < kNamesShown) sim_only.push_back(m.op(b.op).name);
  std::printf("model %s: %d ops\n", m.name.c_str(), m.size());
  std::string k;
  for (const auto& [name, n] : kinds) k += (k.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(name);
  std::printf("kinds: %s\n", k.c_str());
  const std::string view_note = views ? "; " + std::to_string(views) + " view(s) owning none" : "";
  std::printf("activations: %s in all (largest %s%s), parameters: %s\n", format_bytes(act).c_str(),
              format_bytes(largest).c_str(), view_note.c_str(), format_bytes(m.param_bytes()).c_str());
  std::printf("saved for backward: %s (%llu bytes; store-all at the end of the forward pass; aux %s)\n",
              format_bytes(m.saved_bytes()).c_str(), static_cast<unsigned long long>(m.saved_bytes()),
              format_bytes(aux).c_str());
  std::printf("flops: forward %.4g, backward %.4g\n", m.forward_flops(), m.backward_flops());
  // Exactly what `remat run` accepts (core/exec/run_check.h), and why not.
  if (blockers.empty()) {
    std::printf("simulate-only ops: none (executable with remat run)\n");
    return;
  }
  if (sim_only_count == 0) {
    std::printf("simulate-only ops: none, but remat run refuses it: %s\n", blockers.front().why.c_str());
    // Every op that blocks the run, not the first alone, so one fix is not followed by the next surprise.
    for (std::size_t i = 1; i < blockers.size() && i < kNamesShown; ++i)
      std::printf("  and: %s\n", blockers[i].why.c_str());
    if (blockers.size() > kNamesShown) std::printf("  and %zu more\n", blockers.size() - kNamesShown);
    return;
  }
  std::string names;
  for (std::size_t i = 0; i < sim_only.size(); ++i) names += (i ? ", " : "") + std::string(sim_only[i]);
  if (sim_only_count > kNamesShown) names += ", ... (" + std::to_string(sim_only_count - kNamesShown) + " more)";
  std::printf("simulate-only ops (%zu): %s\n", sim_only_count, names.c_str());
  // Why, per kind and reason, with the first op of each (a GPT in bf16 has one line).
  std::map<std::string, std::pair<int, std::size_t>> why;  // "Kind: reason" -> first op, count
  for (const RunBlocker& b : blockers) {
    if (!b.simulate_only) continue;
    auto [it, fresh] = why.try_emplace(std::string(kind_name(m.op(b.op).kind)) + ": " + b.why, b.op, 0);
    ++it->second.second;
  }
  for (const auto& [reason, first] : why)
    std::printf("  why: %s (%zu op(s), first %s)\n", reason.c_str(), first.second, m.op(first.first).name.c_str());
  // What else `run` would refuse once those ops could run (a kernel fed a strided view, …).
  std::size_t shown = 0;
  for (const RunBlocker& b : blockers)
    if (!b.simulate_only && shown++ < 3) std::printf("  and: %s\n", b.why.c_str());
}

// What no strategy changes; the activations depend on the strategy (remat simulate --optimizer).
void print_step_baseline(const Model& m, Optimizer optimizer) {
  const StepMemory s = step_memory(m, optimizer, 0);
  std::printf("whole step with %s, besides activations: %s (parameters %s, gradients %s, optimizer state %s",
              std::string(optimizer_name(optimizer)).c_str(), format_bytes(s.baseline()).c_str(),
              format_bytes(s.parameters).c_str(), format_bytes(s.parameter_grads).c_str(),
              format_bytes(s.optimizer_state).c_str());
  if (s.master_weights) std::printf(", fp32 master weights %s", format_bytes(s.master_weights).c_str());
  std::printf(")\n");
}

void run_model(const ModelOptions& o) {
  const Optimizer optimizer = optimizer_flag(o.optimizer);
  std::vector<std::string> notes;
  const Model m = load_model_with_notes(o.model, &notes);
  for (const auto& n : notes) std::fprintf(stderr, "remat: note: %s\n", n.c_str());
  print_summary(m);
  if (!o.optimizer.empty()) print_step_baseline(m, optimizer);
  if (!o.write.empty()) {
    save_json_model(m, o.write);
    std::printf("wrote %s\n", o.write.c_str());
  }
  if (!o.dot.empty()) {
    save_model_dot(m, o.dot);
    std::printf("wrote %s\n", o.dot.c_str());
  }
}

}  // namespace

void add_model_command(CLI::App& app) {
  auto o = std::make_shared<ModelOptions>();
  auto* cmd = app.add_subcommand("model", "Summarise a model; write it as JSON (docs/model-format.md) or Graphviz DOT");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec (chain:16, mlp:8:1024:64, transformer:12, gpt:12, resnet:18) or a .json/.onnx file")
      ->required();
  cmd->add_option("--optimizer", o->optimizer,
                  "Also print what the step holds besides activations: parameters, their gradients and this "
                  "optimizer's state (" + optimizer_choices() + ")");
  cmd->add_option("--write", o->write, "Write the model in the JSON model format to this file");
  cmd->add_option("--dot", o->dot, "Write the graph in Graphviz DOT to this file (render: dot -Tsvg)");
  cmd->callback([o] { run_model(*o); });
}

}  // namespace remat::cli
