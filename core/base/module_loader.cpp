#include "core/base/module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace remat {
namespace {

std::filesystem::path executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

}  // namespace

std::vector<std::string> module_candidates(const ModuleSpec& spec) {
  std::vector<std::string> out;
  if (const char* env = std::getenv(spec.env); env && *env) {
    out.emplace_back(env);  // an explicit choice is the only one
    return out;
  }
  const auto dir = executable_dir();
  if (!dir.empty()) {
    out.push_back((dir / spec.file).string());
    if (*spec.install_dir) out.push_back((dir / spec.install_dir / spec.file).lexically_normal().string());
  }
  if (*spec.build_path) out.emplace_back(spec.build_path);
  return out;
}

void* open_module(const ModuleSpec& spec, std::string* why_not) {
  auto fail = [&](std::string why) -> void* {
    if (why_not) *why_not = std::move(why);
    return nullptr;
  };
  std::string looked;
  for (const std::string& path : module_candidates(spec)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the module's own copy of core and its libraries stay private
    // to it; only the entry point is looked up.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      return fail(std::string(spec.what) + " " + path + " could not be loaded: " + (err ? err : "unknown error"));
    }
    if (void* entry = dlsym(handle, spec.entry)) return entry;
    return fail(std::string(spec.what) + " " + path + " has no entry point " + spec.entry);
  }
  return fail(std::string(spec.what) + " " + spec.file + " was not found (looked for " + looked + ")");
}

}  // namespace remat
