#include "tests/support/text_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace remat::testing {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace remat::testing
