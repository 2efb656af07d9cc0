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
  if (kind == BackendKind::Cpu) return std::make_unique<CpuBackend>();
  std::string why;
  if (auto b = load_cuda_backend(&why)) return b;
  if (kind == BackendKind::Cuda) throw InputError("--backend cuda: " + why);
  notice << "remat: no GPU: " << why << "; running on the CPU\n";
  return std::make_unique<CpuBackend>();
}

}  // namespace remat::cli
