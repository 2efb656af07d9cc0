// The instruction gate's kernel (gpu/backend/gated_timer.h): one thread holds
// the stream until the host sets a flag in mapped host memory, so that every
// kernel the host issues behind it then runs back to back. A time limit
// keeps a host that waits for the stream inside an instruction from waiting
// forever: the gate then lets go and says so.
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gate_kernel(const volatile int* open, int* timed_out, unsigned long long limit_ns) {
  const unsigned long long start = global_ns();
  while (*open == 0) {
    if (global_ns() - start > limit_ns) {
      *timed_out += 1;
      return;
    }
    __nanosleep(500);
  }
}

}  // namespace

void gate_hold(const int* open, int* timed_out, uint64_t limit_ns, cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(open, timed_out, limit_ns);
  CUDA_CHECK_THROW(cudaGetLastError());
}

}  // namespace remat::cuda
