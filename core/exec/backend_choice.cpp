#include "core/exec/backend_choice.h"

#include "core/exec/cpu_backend.h"
#include "core/exec/cuda_module.h"

namespace remat {

ChosenBackend choose_backend(BackendKind kind) {
  if (kind == BackendKind::Cpu) return {std::make_unique<CpuBackend>(), {}};
  std::string why;
  if (auto b = load_cuda_backend(&why)) return {std::move(b), {}};
  if (kind == BackendKind::Cuda) throw NoUsableGpu(why);
  return {std::make_unique<CpuBackend>(), why};
}

}  // namespace remat
