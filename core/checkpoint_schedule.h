// The one generator behind store-all, recompute-all, sqrt, every-k and manual:
// a checkpoint set and a partition of the ops into backward phases.
//
// The forward pass computes every op once. Backward walks the phases from the
// last to the first; before the backward steps of a phase it recomputes, in
// topological order, every tensor those steps read that is neither a
// checkpoint nor already recomputed in this phase (recursively, back to
// checkpoints); an op with private saved tensors aux(v) is recomputed for
// them unless it is a checkpoint (a checkpoint keeps its aux from the forward
// pass). A checkpointed view keeps its storage, so the aliases down to the
// owner are checkpoints too. The last phase reads what the forward pass left. Frees then
// follow from liveness (schedule.h), so a segment's recomputed tensors live only
// until the phase's last backward step reads them. Works on any DAG.
#pragma once
#include <vector>

#include "core/schedule.h"

namespace remat {

struct Model;

// `checkpoint[v]` keeps A(v) from the forward pass to its last backward use (op
// 0 is always kept). `phase_start` lists the first op of each backward phase in
// increasing order, starting with 1: phase j covers [phase_start[j],
// phase_start[j+1]).
Schedule checkpoint_schedule(const Model& model, std::vector<char> checkpoint,
                             const std::vector<int>& phase_start, std::string strategy);

// Segments between checkpoints: phases start right after each checkpoint.
Schedule segment_schedule(const Model& model, const std::vector<int>& checkpoints, std::string strategy);

}  // namespace remat
