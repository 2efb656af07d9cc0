// Placeholder: replaced when `remat run` lands.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Execute strategies on the CPU or GPU and measure memory and time (not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw InputError("'remat run' is not available in this build yet"); });
}

}  // namespace remat::cli
