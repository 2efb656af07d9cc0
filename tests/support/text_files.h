// Reading what a test wrote or a program printed.
#pragma once
#include <string>

namespace remat::testing {

// The whole file at `path` ("" when it cannot be read).
std::string slurp(const std::string& path);
// The number of '\n' in `s`: the lines of a program's output.
int count_lines(const std::string& s);

}  // namespace remat::testing
