// Placeholder: replaced when `remat export` lands.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Export timeline and graph pictures (PNG/SVG) (not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw InputError("'remat export' is not available in this build yet"); });
}

}  // namespace remat::cli
