// Offload (docs/strategies.md#offload): the tensors a schedule keeps through
// its backward's recomputation go to host memory after their last forward
// read and come back one segment ahead of the backward that needs them.
#pragma once
#include <memory>

#include "core/sim/schedule.h"
#include "core/strategies/strategy.h"

namespace remat {

struct Model;

// Adds offload/fetch pairs to a valid schedule without offloads. Candidates:
// every A(c) resident when the backward starts (the first bwd) that the
// backward reads only after its first recompute (not the last segment's
// tensors, which the first backward steps read at once), c a storage owner
// that no view aliases. Each goes to the host right after its last read or
// compute before the backward; ordered by their first backward read, the
// first comes back when the backward starts and each next one at the first
// backward read of the one before it, i.e. one segment ahead (for a segment
// schedule) of the backward that needs it. No recompute: nothing changes.
Schedule with_offloads(const Model& model, Schedule inner);

// `offload` (inner: sqrt), `offload:K` (every-k:K), `offload+SPEC` (any strategy
// but another offload). `name` is the spec that recreates it.
std::unique_ptr<Strategy> make_offload(std::unique_ptr<Strategy> inner, std::string name);

}  // namespace remat
