#include "app/cli/backend_choice.h"

#include "core/base/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/cuda_module.h"

namespace remat::cli {

bool build_has_cuda_backend() { return cuda_module_built(); }

BackendKind parse_backend_kind(const std::string& s) {
  if (s == "auto") return BackendKind::Auto;
  if (s == "cpu") return BackendKind::Cpu;
  if (s == "cuda") return BackendKind::Cuda;
  throw InputError("--backend: unknown backend '" + s + "' (expected auto, cpu or cuda)");
}

std::unique_ptr<Backend> make_backend(BackendKind kind, std::ostream& notice) {
  try {
    ChosenBackend chosen = choose_backend(kind);
    if (!chosen.no_gpu.empty()) notice << no_gpu_notice(chosen.no_gpu);
    return std::move(chosen.backend);
  } catch (const NoUsableGpu& e) {
    throw no_cuda_error(e);
  }
}

InputError no_cuda_error(const NoUsableGpu& e) { return InputError("--backend cuda: " + e.why()); }

std::string no_gpu_notice(const std::string& why) { return "remat: no GPU: " + why + "; running on the CPU\n"; }

}  // namespace remat::cli
