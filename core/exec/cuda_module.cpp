#include "core/exec/cuda_module.h"

#include <cstdlib>
#include <mutex>

#include "core/base/module_loader.h"

namespace remat {
namespace {

// Set by gpu/CMakeLists.txt on this file only, when the module is built:
// REMAT_CUDA_MODULE_BUILD_PATH (the module in the build tree) and
// REMAT_CUDA_MODULE_INSTALL_DIR (its folder relative to the installed bin/).
#ifdef REMAT_CUDA_MODULE_BUILD_PATH
constexpr bool kBuilt = true;
constexpr ModuleSpec kSpec{kCudaModuleFile, kCudaModuleEntry, "REMAT_CUDA_MODULE", REMAT_CUDA_MODULE_BUILD_PATH,
                           REMAT_CUDA_MODULE_INSTALL_DIR, "the CUDA backend module"};
#else
constexpr bool kBuilt = false;
constexpr ModuleSpec kSpec{kCudaModuleFile, kCudaModuleEntry, "REMAT_CUDA_MODULE", "", "", "the CUDA backend module"};
#endif

struct Loaded {
  CudaModuleEntry entry = nullptr;
  std::string why_not;  // when entry is null
};

Loaded load() {
  Loaded out;
  if (!kBuilt && !std::getenv(kSpec.env)) {
    out.why_not = "this build has no CUDA backend (configure with -DREMAT_CUDA=ON where nvcc is installed)";
    return out;
  }
  out.entry = reinterpret_cast<CudaModuleEntry>(open_module(kSpec, &out.why_not));
  return out;
}

}  // namespace

bool cuda_module_built() { return kBuilt; }

std::vector<std::string> cuda_module_candidates() { return module_candidates(kSpec); }

std::unique_ptr<Backend> load_cuda_backend(std::string* why_not) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  std::string why;
  Backend* b = nullptr;
  if (loaded.entry) b = loaded.entry(cuda_module_abi().c_str(), &why);
  else why = loaded.why_not;
  if (!b && why.empty()) why = "no CUDA device";
  if (!b && why_not) *why_not = why;
  return std::unique_ptr<Backend>(b);
}

}  // namespace remat
