// remat export without the GUI build: pictures need Qt, so say so clearly;
// the memory snapshot needs none and works. app/CMakeLists.txt picks this
// file or cmd_export.cpp.
#include <iostream>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/export_snapshot.h"
#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/io/model_source.h"
#include "core/io/torch_plan.h"
#include "core/strategies/registry.h"

namespace remat::cli {

void add_export_command(CLI::App& app) {
  struct Options {
    std::string model, strategies = "store-all";
    SnapshotExportOptions snapshot;
    std::string torchPlan;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("export", "Export a PyTorch memory snapshot; pictures (PNG/SVG) need the GUI build");
  cmd->add_option("-m,--model", o->model, "Model: a preset spec or a .json/.onnx file");
  cmd->add_option("-s,--strategy", o->strategies, "Strategy (the snapshot shows the first)")->capture_default_str();
  add_snapshot_export_options(cmd, o->snapshot);
  cmd->add_option("--torch-plan", o->torchPlan,
                  "Write the first strategy as a PyTorch plan (.json) for remat_capture.apply (captured models only)");
  cmd->allow_extras();
  cmd->callback([o, cmd] {
    if (!cmd->remaining().empty() || (o->snapshot.path.empty() && o->torchPlan.empty()))
      throw InputError(
          "remat was built without the GUI (REMAT_BUILD_GUI=OFF): pictures need Qt; rebuild with "
          "-DREMAT_BUILD_GUI=ON, or use 'remat simulate --json/--csv' for the data ('--memory-snapshot' and "
          "'--torch-plan' work here)");
    if (o->model.empty()) throw InputError("--model is required");
    check_snapshot_export(o->snapshot);
    if (!o->torchPlan.empty()) check_torch_plan_path(o->torchPlan);
    const auto specs = expand_strategy_list(o->strategies);
    for (const auto& spec : specs) (void)make_strategy(resolve_budget_shares(spec, 0));
    const Model model = load_model(o->model);
    const auto runs = simulate_strategies(model, resolve_budget_shares(model, specs));
    for (const auto& r : runs)
      if (!r.ok()) throw InputError("strategy '" + r.spec + "': " + r.error);
    const std::optional<TorchPlan> plan =
        o->torchPlan.empty() ? std::nullopt : std::optional<TorchPlan>(make_torch_plan(model, runs.front()));
    if (!o->snapshot.path.empty()) export_memory_snapshot(model, runs.front(), o->snapshot);
    if (plan) {
      write_torch_plan(model, *plan, o->torchPlan);
      std::cout << "wrote " << o->torchPlan << " (" << plan->strategy << ", " << plan->kind << " plan)\n";
    }
  });
}

}  // namespace remat::cli
