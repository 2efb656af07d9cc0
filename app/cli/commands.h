// Subcommands of `remat`. Each registers its options on the app and a callback
// that runs it; errors are thrown (InputError) and turned into exit code 2 by main.
#pragma once
#include <CLI/CLI.hpp>

namespace remat::cli {

void add_simulate_command(CLI::App& app);

// Human-readable byte counts for tables: 1536 -> "1.50 KiB".
std::string format_bytes(uint64_t bytes);

}  // namespace remat::cli
