// Subcommands of `remat`. Each registers its options on the app and a callback
// that runs it; errors are thrown (InputError) and turned into exit code 2 by main.
#pragma once
#include <CLI/CLI.hpp>

namespace remat::cli {

void add_simulate_command(CLI::App& app);  // cmd_simulate.cpp
void add_run_command(CLI::App& app);       // cmd_run.cpp: execute on a backend
void add_model_command(CLI::App& app);     // cmd_model.cpp: write/inspect models
void add_export_command(CLI::App& app);    // cmd_export.cpp: PNG/SVG (needs the GUI build)
void add_sweep_command(CLI::App& app);     // cmd_sweep.cpp: budget sweep
void add_explain_command(CLI::App& app);   // cmd_explain.cpp: why the peak is where it is

// Human-readable byte counts for tables: 1536 -> "1.50 KiB".
std::string format_bytes(uint64_t bytes);

}  // namespace remat::cli
