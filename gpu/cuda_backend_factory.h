// The one entry point of the CUDA backend that the app layer calls (core never
// does: it does not know CUDA). Implemented in gpu/ by remat_cuda_backend; the
// app reaches it through the module libremat_cuda.so (backend/cuda_module_entry.cpp).
#pragma once
#include <memory>
#include <string>

#include "core/exec/backend.h"

namespace remat::cuda {

// A backend on the first CUDA device, or nullptr with the reason in *why_not
// (no driver, no device, cudaGetDeviceCount failed ...); never throws for that.
std::unique_ptr<remat::Backend> make_cuda_backend(std::string* why_not);

}  // namespace remat::cuda
