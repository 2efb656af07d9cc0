// REMAT_CUDA_GATE: whether the CUDA backend times each instruction's kernels
// alone (gpu/backend/gated_timer.h; docs/gpu.md, "Is a step waiting for the
// host?"). Read here, outside gpu/, so that `remat run` refuses a bad value
// before any work, as it does REMAT_CUDA_GEMM's.
#pragma once

namespace remat {

// "1": gated; "0" or unset: not; any other value throws InputError naming
// the variable and the value.
bool gate_from_env();

}  // namespace remat
