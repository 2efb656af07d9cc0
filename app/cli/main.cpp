// remat: the command-line face of Remat Studio. Every number the window shows
// can be reproduced here.
#include <iostream>

#include "app/cli/commands.h"
#include "core/base/errors.h"
#include "core/model/presets.h"

int main(int argc, char** argv) {
  CLI::App app{"remat: simulate, run and export gradient-checkpointing schedules"};
  app.require_subcommand(1);
  app.footer("Models: " + std::string(remat::kPresetSpecs) +
             ", or a .json/.onnx file.\n"
             "Run 'remat COMMAND --help' for a command's options.");
  remat::cli::add_simulate_command(app);
  remat::cli::add_run_command(app);
  remat::cli::add_model_command(app);
  remat::cli::add_export_command(app);
  remat::cli::add_sweep_command(app);
  remat::cli::add_explain_command(app);
  remat::cli::add_compare_snapshot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "remat: error: " << e.what() << "\n";
    return 2;
  } catch (const remat::InputError& e) {
    std::cerr << "remat: error: " << e.what() << "\n";
    return 2;
  } catch (const remat::cli::Failure& e) {
    std::cerr << "remat: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "remat: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
