// Which backend a run executes on: auto, cpu or cuda. core does not link
// CUDA: the CUDA backend is a module (libremat_cuda.so, cuda_module.h) opened
// here only when auto or cuda asks for it, so work that never runs on a GPU
// does not pay for loading cuBLAS.
#pragma once
#include <memory>
#include <string>

#include "core/base/errors.h"
#include "core/exec/backend.h"

namespace remat {

enum class BackendKind { Auto, Cpu, Cuda };

struct ChosenBackend {
  std::unique_ptr<Backend> backend;
  std::string no_gpu;  // Auto fell back to the CPU: why (the loader's or the runtime's reason); else empty
};

// Cuda asked for and no GPU can be had: what() is "no usable GPU: <why>";
// why() alone for a front-end that words it its own way.
class NoUsableGpu : public InputError {
 public:
  explicit NoUsableGpu(std::string why) : InputError("no usable GPU: " + why), why_(std::move(why)) {}
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

// Cpu: the CPU backend. Auto: CUDA when the module loads and a device
// answers, else the CPU with the reason. Cuda: CUDA or NoUsableGpu.
ChosenBackend choose_backend(BackendKind kind);

}  // namespace remat
