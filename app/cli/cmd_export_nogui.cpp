// remat export without the GUI build: pictures need Qt, so say so clearly.
// app/CMakeLists.txt picks this file or cmd_export.cpp.
#include "app/cli/commands.h"
#include "core/errors.h"

namespace remat::cli {

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Export timeline and graph pictures (PNG/SVG); needs the GUI build");
  cmd->allow_extras();
  cmd->callback([] {
    throw InputError(
        "remat was built without the GUI (REMAT_BUILD_GUI=OFF): 'remat export' needs Qt; "
        "rebuild with -DREMAT_BUILD_GUI=ON, or use 'remat simulate --json/--csv' for the data");
  });
}

}  // namespace remat::cli
