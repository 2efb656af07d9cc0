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
#include <cstdint>
#include <limits>
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

// The length of the schedules above, without making them. Exact; on a chain
// (every op reading the one before it) in O(n) whatever the length, on any
// other DAG by walking the phases without emitting, which stops once the
// count passes `limit` (then Bound::AtLeast).
ScheduleSize checkpoint_schedule_size(const Model& model, std::vector<char> checkpoint,
                                      const std::vector<int>& phase_start,
                                      uint64_t limit = std::numeric_limits<uint64_t>::max());
ScheduleSize segment_schedule_size(const Model& model, const std::vector<int>& checkpoints,
                                   uint64_t limit = std::numeric_limits<uint64_t>::max());
// An upper bound on segment_schedule's length over every checkpoint set, for
// searches whose set is not known beforehand (Bound::AtMost). With k
// checkpoints among the m = n-2 ops between input and loss, k phases
// recompute at most m - k ops each; on a chain every op at most once.
ScheduleSize segment_schedule_bound(const Model& model);

}  // namespace remat
