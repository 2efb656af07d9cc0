#include "core/io/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/base/errors.h"

namespace remat {
namespace {

std::string temp_beside(const std::string& path) {
  std::random_device rd;
  const std::filesystem::path p(path);
  const std::string ext = p.extension().string();  // keep it: image writers pick the format from it
  return (p.parent_path() / ("." + p.stem().string() + ".tmp" + std::to_string(rd() % 1000000) + ext)).string();
}

}  // namespace

void check_output_path(const std::string& option, const std::string& path, const std::string& extension,
                       const std::string& why_extension) {
  const std::filesystem::path p(path);
  if (p.extension() != extension)
    throw InputError(option + " '" + path + "': " + why_extension + "; give a file ending in " + extension);
  const auto dir = p.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    throw InputError(option + " '" + path + "': folder '" + dir.string() + "' does not exist");
}

void replace_file_atomically(const std::string& path, const std::function<bool(const std::string&)>& write) {
  if (path.empty()) throw InputError("output path is empty");
  const std::string tmp = temp_beside(path);
  bool ok = false;
  std::string why;
  try {
    ok = write(tmp);
    if (!ok) why = "the writer failed";
  } catch (const std::exception& e) {
    why = e.what();
  }
  std::error_code ec;
  if (ok) {
    std::filesystem::rename(tmp, path, ec);
    if (!ec) return;
    why = ec.message();
  }
  std::filesystem::remove(tmp, ec);
  throw InputError("cannot write '" + path + "': " + why);
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  replace_file_atomically(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw std::runtime_error("write failed (disk full?)");
    out.close();
    if (out.fail()) throw std::runtime_error("close failed (disk full?)");
    return true;
  });
}

}  // namespace remat
