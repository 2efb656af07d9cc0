#include "core/exec/cuda_module.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace remat {
namespace {

// Set by gpu/CMakeLists.txt on this file only, when the module is built:
// REMAT_CUDA_MODULE_BUILD_PATH (the module in the build tree) and
// REMAT_CUDA_MODULE_INSTALL_DIR (its folder relative to the installed bin/).
#ifdef REMAT_CUDA_MODULE_BUILD_PATH
constexpr bool kBuilt = true;
constexpr const char* kBuildPath = REMAT_CUDA_MODULE_BUILD_PATH;
constexpr const char* kInstallDir = REMAT_CUDA_MODULE_INSTALL_DIR;
#else
constexpr bool kBuilt = false;
constexpr const char* kBuildPath = "";
constexpr const char* kInstallDir = "";
#endif

std::filesystem::path executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

struct Loaded {
  CudaModuleEntry entry = nullptr;
  std::string why_not;  // when entry is null
};

Loaded open_module() {
  Loaded out;
  if (!kBuilt && !std::getenv("REMAT_CUDA_MODULE")) {
    out.why_not = "this build has no CUDA backend (configure with -DREMAT_CUDA=ON where nvcc is installed)";
    return out;
  }
  std::string looked;
  for (const std::string& path : cuda_module_candidates()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      looked += (looked.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: the module's own copy of core and CUDA's libraries stay
    // private to it; only the entry point is looked up.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      out.why_not = "the CUDA backend module " + path + " could not be loaded: " + (err ? err : "unknown error");
      return out;
    }
    out.entry = reinterpret_cast<CudaModuleEntry>(dlsym(handle, kCudaModuleEntry));
    if (!out.entry) out.why_not = "the CUDA backend module " + path + " has no entry point " + kCudaModuleEntry;
    return out;  // never dlclose()d: backends it made must not outlive their code
  }
  out.why_not = std::string("the CUDA backend module ") + kCudaModuleFile + " was not found (looked for " + looked + ")";
  return out;
}

}  // namespace

bool cuda_module_built() { return kBuilt; }

std::vector<std::string> cuda_module_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("REMAT_CUDA_MODULE"); env && *env) {
    out.emplace_back(env);  // an explicit choice is the only one
    return out;
  }
  const auto dir = executable_dir();
  if (!dir.empty()) {
    out.push_back((dir / kCudaModuleFile).string());
    if (*kInstallDir) out.push_back((dir / kInstallDir / kCudaModuleFile).lexically_normal().string());
  }
  if (*kBuildPath) out.emplace_back(kBuildPath);
  return out;
}

std::unique_ptr<Backend> load_cuda_backend(std::string* why_not) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = open_module(); });
  std::string why;
  Backend* b = nullptr;
  if (loaded.entry) b = loaded.entry(cuda_module_abi().c_str(), &why);
  else why = loaded.why_not;
  if (!b && why.empty()) why = "no CUDA device";
  if (!b && why_not) *why_not = why;
  return std::unique_ptr<Backend>(b);
}

}  // namespace remat
