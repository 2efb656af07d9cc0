// A kernel that faults on purpose (a write to an unmapped address), to test
// that a device fault is a result and that the backend recovers from it.
#pragma once
#include <cuda_runtime.h>

namespace remat::testing {

// Queues the faulting kernel on `stream`; the fault shows at the next call
// that waits for it (a sticky cudaErrorIllegalAddress).
void launch_illegal_write(cudaStream_t stream);

}  // namespace remat::testing
