// Checkpoint sets: how the named strategies choose them from a model, and the
// one generator that turns a set into a schedule (store-all, recompute-all,
// sqrt, every-k, manual, auto, selective, budget and optimal all end here).
//
// The generator: the forward pass computes every op once. Backward walks the
// phases from the last to the first; in each it recomputes, in topological
// order, every tensor the phase's backward steps read that is neither a
// checkpoint nor already recomputed in this phase (recursively, back to
// checkpoints); an op with private saved tensors aux(v) is recomputed for
// them unless it is a checkpoint (a checkpoint keeps its aux from the forward
// pass). The recomputation runs right before the first backward step that
// reads one of those tensors: the steps at the phase's top that read none
// run first, as PyTorch's checkpointing recomputes a region when backward
// first unpacks one of its saved tensors (docs/memory-model.md). A checkpointed view keeps its storage, so the aliases down to the
// owner are checkpoints too. The last phase reads what the forward pass left.
// Frees then follow from liveness (schedule.h), so a segment's recomputed
// tensors live only until the phase's last backward step reads them. Works on
// any DAG.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

// True when every op but the input reads exactly the op before it and is read
// only by the op after it (chain:N, mlp:N).
bool is_chain(const Model& model);

// Every k-th op (k, 2k, ... before the loss): where every-k:K and sqrt cut
// the model into segments.
std::vector<int> every_k_boundaries(const Model& model, int k);
// ceil(sqrt(n)) for the n ops after the input (at least 1).
int sqrt_interval(const Model& model);

// Articulation points of the model's graph seen undirected (Boost.Graph):
// tensors whose removal disconnects the past from the future. Sorted; the
// input and the loss are left out.
std::vector<int> articulation_candidates(const Model& model);
// From those, the first at least sqrt_interval() ops after the previous pick
// (on a chain every op is a candidate, so this is exactly `sqrt`).
std::vector<int> auto_checkpoints(const Model& model);

// Expensive outputs (Linear, Dense, losses, Generic ops whose cost we do not
// trust) and cheap ops read by several ops (a residual stream).
std::vector<int> selective_checkpoints(const Model& model);

// `checkpoint[v]` keeps A(v) from the forward pass to its last backward use (op
// 0 is always kept). `phase_start` lists the first op of each backward phase in
// increasing order, starting with 1: phase j covers [phase_start[j],
// phase_start[j+1]).
Schedule checkpoint_schedule(const Model& model, std::vector<char> checkpoint,
                             const std::vector<int>& phase_start, std::string strategy);

// What cuts after the `boundaries` (sorted op ids) keep: every A(t), t <= c,
// that an op after some boundary c reads, as torch.utils.checkpoint keeps a
// segment's inputs. On a chain these are the boundaries themselves; across a
// residual Add the skip's tensor too, so a segment's recompute never runs back
// into an earlier segment. Sorted; the input left out.
std::vector<int> cut_checkpoints(const Model& model, const std::vector<int>& boundaries);

// Segments between boundaries, each recomputed once from what its cut keeps
// (cut_checkpoints): phases start right after each boundary. every-k and sqrt.
Schedule cut_schedule(const Model& model, const std::vector<int>& boundaries, std::string strategy);
ScheduleSize cut_schedule_size(const Model& model, const std::vector<int>& boundaries,
                               uint64_t limit = std::numeric_limits<uint64_t>::max());

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
