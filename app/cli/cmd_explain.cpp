// Placeholder: replaced when `remat explain` lands.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "Explain why a strategy's peak is where it is (not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw InputError("'remat explain' is not available in this build yet"); });
}

}  // namespace remat::cli
