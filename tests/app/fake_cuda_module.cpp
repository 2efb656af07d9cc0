// Stands in for libremat_cuda.so in the loader's tests, where no GPU (and
// maybe no CUDA) exists: the same entry point, answering no backend and
// whether the ABI string it was handed is this build's.
#include "core/exec/cuda_module.h"

extern "C" __attribute__((visibility("default"))) remat::Backend* remat_cuda_module_create(const char* abi,
                                                                                         std::string* why_not) {
  *why_not = std::string("fake module: ") + (abi && remat::cuda_module_abi() == abi ? "same build" : "another build");
  return nullptr;
}
