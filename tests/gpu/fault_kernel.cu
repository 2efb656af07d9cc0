#include "tests/gpu/fault_kernel.h"

namespace remat::testing {
namespace {

__global__ void illegal_write_kernel(float* p) { *p = 1.0f; }

}  // namespace

void launch_illegal_write(cudaStream_t stream) {
  // An address no allocation can have: the first page is never mapped.
  illegal_write_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<float*>(0x8));
}

}  // namespace remat::testing
