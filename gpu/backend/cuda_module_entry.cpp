// The one symbol libremat_cuda.so exports (core/exec/cuda_module.h): the app
// opens the module only when a run asks for CUDA, so linking cuBLAS costs
// nothing to the commands that never touch a GPU.
#include <exception>

#include "core/exec/cuda_module.h"
#include "gpu/cuda_backend_factory.h"

extern "C" __attribute__((visibility("default"))) remat::Backend* remat_cuda_module_create(const char* abi,
                                                                                         std::string* why_not) {
  // Nothing may unwind through a C entry point.
  try {
    if (!abi || remat::cuda_module_abi() != abi) {
      if (why_not)
        *why_not = "the CUDA backend module was built from another version of remat (" + remat::cuda_module_abi() +
                   ", the program expects " + (abi ? abi : "?") + "); rebuild or reinstall both";
      return nullptr;
    }
    return remat::cuda::make_cuda_backend(why_not).release();
  } catch (const std::exception& e) {
    if (why_not) *why_not = std::string("the CUDA backend could not be set up: ") + e.what();
  } catch (...) {
    if (why_not) *why_not = "the CUDA backend could not be set up";
  }
  return nullptr;
}
