#include "gpu/cuda_backend_factory.h"

#include <cuda_runtime.h>

#include "gpu/backend/cuda_backend.h"

namespace remat::cuda {

std::unique_ptr<remat::Backend> make_cuda_backend(std::string* why_not) {
  auto fail = [&](std::string reason) -> std::unique_ptr<remat::Backend> {
    (void)cudaGetLastError();  // leave no error behind for the next caller
    if (why_not) *why_not = std::move(reason);
    return nullptr;
  };
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return fail(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  if (count == 0) return fail("no CUDA device (cudaGetDeviceCount found 0)");
  int pools = 0;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0) != cudaSuccess || !pools)
    return fail("CUDA device 0 has no stream-ordered memory pools (cudaMallocAsync)");
  try {
    return std::make_unique<CudaBackend>(0);
  } catch (const std::exception& e) {
    return fail(std::string("CUDA device 0 could not be set up: ") + e.what());
  }
}

}  // namespace remat::cuda
