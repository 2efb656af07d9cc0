// Output files appear whole or not at all: written to a temporary beside the
// target, flushed, then renamed over it. A failure (bad path, full disk)
// removes the temporary and throws InputError naming the path.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace remat {

// Before any work: InputError "<option> '<path>': ..." unless the path ends
// in `extension` (".json") and its folder exists, so that a bad output path
// costs no run and leaves no file.
void check_output_path(const std::string& option, const std::string& path, const std::string& extension,
                       const std::string& why_extension);

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
// For writers that need a file name (image encoders): `write` must create the
// given temporary path; it is renamed over `path` if `write` returns true.
void replace_file_atomically(const std::string& path, const std::function<bool(const std::string& tmp)>& write);

}  // namespace remat
