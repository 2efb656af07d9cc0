// Placeholder: replaced when `remat sweep` lands.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_sweep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "Best recompute overhead for each memory budget (not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw InputError("'remat sweep' is not available in this build yet"); });
}

}  // namespace remat::cli
