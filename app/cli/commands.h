// Subcommands of `remat`. Each registers its options on the app and a callback
// that runs it. main turns errors into exit codes: InputError (the user's
// input) 2, Failure (the work itself failed: a device fault) 1, anything else
// is an internal error, 1.
#pragma once
#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "core/sim/instruction_limit.h"
#include "core/sim/time_model.h"

namespace remat::cli {

// The command ran but its work failed through nobody's input (a strategy's
// device fault): "remat: error: ...", exit 1.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void add_simulate_command(CLI::App& app);  // cmd_simulate.cpp
void add_run_command(CLI::App& app);       // cmd_run.cpp: execute on a backend
void add_model_command(CLI::App& app);     // cmd_model.cpp: write/inspect models
void add_export_command(CLI::App& app);    // cmd_export.cpp: PNG/SVG (needs the GUI build)
void add_sweep_command(CLI::App& app);     // cmd_sweep.cpp: budget sweep
void add_explain_command(CLI::App& app);   // cmd_explain.cpp: why the peak is where it is
void add_compare_snapshot_command(CLI::App& app);  // cmd_compare_snapshot.cpp: a PyTorch snapshot against the prediction

// --max-instructions N for a command that makes schedules: a strategy whose
// schedule is longer is refused (exit 2) with its length and memory
// (limit_option.cpp).
void add_max_instructions_option(CLI::App* cmd, InstructionLimit& limit);

// Human-readable byte counts for tables: 1536 -> "1.50 KiB".
std::string format_bytes(uint64_t bytes);

// --device-flops and --link-bandwidth (time_model_option.cpp): as given,
// parsed by time_model_of (InputError naming the flag); empty: the default.
struct TimeModelFlags {
  std::string device_flops, link_bandwidth, device_bandwidth;
};
void add_time_model_options(CLI::App* cmd, TimeModelFlags& flags);
TimeModel time_model_of(const TimeModelFlags& flags);
// format_seconds ("12.3 us", "4.56 ms") is core's (core/sim/time_model.h): the window prints the same.
using remat::format_seconds;

}  // namespace remat::cli
