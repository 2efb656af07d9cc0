// Runs `remat` with arguments and captures stdout, stderr and the exit code.
#pragma once
#include <string>

struct CliResult {
  int code = -1;
  std::string out, err;
};

// `args` is appended to the binary's path as written (shell-quoted by the caller).
CliResult run_cli(const std::string& args);
std::string temp_path(const std::string& name);
