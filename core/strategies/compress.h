// Compressed checkpoints (docs/strategies.md#compress): the modifier
// SPEC+compress:DTYPE stores SPEC's checkpoints in a smaller type between the
// forward pass and the recompute that first reads them.
#pragma once
#include <memory>
#include <string>

#include "core/sim/compression.h"
#include "core/sim/schedule.h"
#include "core/strategies/strategy.h"

namespace remat {

struct Model;

// Adds compress/decompress pairs to a valid schedule (offloads allowed; no
// compression yet). Which tensors: every A(c) kept from the forward pass into
// the backward (resident, or offloaded whole, when the first bwd runs) whose
// first read in the backward is a recompute (a fwd), c an f32 storage owner
// that no view aliases and that `p` makes smaller. Those are the checkpoints
// that wait through the backward of the segments after theirs; a tensor the
// backward reads directly (the last segment's, kept for its own bwd) is not.
// Each is compressed right after its last read (or compute) in the forward
// pass, `compress A(c); free A(c)`, and decompressed right before that first
// recompute, `decompress A(c); free C(c)`; the decompressed copy then lives
// as A(c) did in `inner`. When none qualifies, `inner` comes back with a note.
Schedule with_compression(const Model& model, Schedule inner, Packing p);

// SPEC+compress:DTYPE: `inner` is SPEC's strategy, `spec` the whole spec.
std::unique_ptr<Strategy> make_compress(std::unique_ptr<Strategy> inner, Packing p, std::string spec);

}  // namespace remat
