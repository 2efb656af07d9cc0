// Placeholder: replaced when `remat model` lands.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("model", "Inspect a model, write it as JSON or Graphviz (not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw InputError("'remat model' is not available in this build yet"); });
}

}  // namespace remat::cli
