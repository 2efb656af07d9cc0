// The CUDA backend as a module opened at run time. Linking cuBLAS into `remat`
// cost every command 0.7 s and 200 MB of start-up (libcublasLt's static
// initialisation) even when no GPU was wanted; now gpu/ builds
// libremat_cuda.so and the app opens it (dlopen) only when a run asks for
// CUDA. This file is the app's side: no CUDA header, only the C entry point's
// contract, which gpu/backend/cuda_module_entry.cpp implements.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/exec/backend.h"

namespace remat {

// The module's file name and its one exported symbol:
//   extern "C" remat::Backend* remat_cuda_module_create(const char* abi, std::string* why_not);
// It returns a backend on the first CUDA device, or nullptr with the reason
// (no driver, no device, an ABI mismatch). The module is never closed, so the
// backend's code outlives every backend it made.
inline constexpr const char* kCudaModuleFile = "libremat_cuda.so";
inline constexpr const char* kCudaModuleEntry = "remat_cuda_module_create";
using CudaModuleEntry = Backend* (*)(const char* abi, std::string* why_not);

// Both sides compile this string, the module with its own copy of the
// classes they share: a module from another build of remat whose layouts
// differ refuses to make a backend instead of crashing. Bump the number when
// an interface changes in a way these sizes do not show (a new virtual).
inline std::string cuda_module_abi() {
  return "remat-cuda-module 1 Backend " + std::to_string(sizeof(Backend)) + " Model " + std::to_string(sizeof(Model)) +
         " Op " + std::to_string(sizeof(Op)) + " HostData " + std::to_string(sizeof(HostData)) + " MemoryStats " +
         std::to_string(sizeof(MemoryStats));
}

// Where the module is looked for, in order: $REMAT_CUDA_MODULE (a path), next
// to the running executable, the install layout (<prefix>/lib/remat/ beside
// <prefix>/bin/), and the build tree this binary was built in.
std::vector<std::string> cuda_module_candidates();

// True when this build made the module (configured with CUDA), whether or not
// it can be found or a device answers.
bool cuda_module_built();

// A backend from the module, or nullptr with one line in *why_not: not built,
// not found (with where it looked), not loadable (dlerror), no device.
// Loads the module at most once per process; thread-safe.
std::unique_ptr<Backend> load_cuda_backend(std::string* why_not);

}  // namespace remat
