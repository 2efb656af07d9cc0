#include "app/cli/backend_choice.h"

#include "core/errors.h"
#include "core/exec/cpu_backend.h"

#ifdef REMAT_HAVE_CUDA_BACKEND
#include "gpu/cuda_backend_factory.h"
#endif

namespace remat::cli {
namespace {

// nullptr with the reason when there is no usable CUDA device.
std::unique_ptr<Backend> try_cuda(std::string& why_not) {
#ifdef REMAT_HAVE_CUDA_BACKEND
  auto b = remat::cuda::make_cuda_backend(&why_not);
  if (!b && why_not.empty()) why_not = "no CUDA device";
  return b;
#else
  why_not = "this build has no CUDA backend (configure with -DREMAT_CUDA=ON where nvcc is installed)";
  return nullptr;
#endif
}

}  // namespace

bool build_has_cuda_backend() {
#ifdef REMAT_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

BackendKind parse_backend_kind(const std::string& s) {
  if (s == "auto") return BackendKind::Auto;
  if (s == "cpu") return BackendKind::Cpu;
  if (s == "cuda") return BackendKind::Cuda;
  throw InputError("--backend: unknown backend '" + s + "' (expected auto, cpu or cuda)");
}

std::unique_ptr<Backend> make_backend(BackendKind kind, std::ostream& notice) {
  if (kind == BackendKind::Cpu) return std::make_unique<CpuBackend>();
  std::string why;
  if (auto b = try_cuda(why)) return b;
  if (kind == BackendKind::Cuda) throw InputError("--backend cuda: " + why);
  notice << "remat: no GPU: " << why << "; running on the CPU\n";
  return std::make_unique<CpuBackend>();
}

}  // namespace remat::cli
