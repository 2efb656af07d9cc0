#include "cli_runner.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "tests/support/text_files.h"

using remat::testing::slurp;

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("remat_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

CliResult run_cli(const std::string& args) {
  const std::string out = temp_path("stdout.txt"), err = temp_path("stderr.txt");
  const std::string cmd = std::string(REMAT_CLI) + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}
