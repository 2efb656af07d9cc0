// Pipeline parallelism's two numbers per stage: how many micro-batches a
// stage holds at once (what multiplies its activations) and how much of the
// step it waits (the bubble), for each schedule of parallel_spec.h.
#pragma once
#include "core/parallel/parallel_spec.h"

namespace remat {

// Micro-batches whose forward has run on stage r (0-based) and whose backward
// has not, at the most: GPipe M; 1F1B min(p - r, M) (Narayanan et al. 2021);
// ZB-H1 as 1F1B (Qi et al. 2023 keep its in-flight count and delay only the
// weight-gradient passes, whose memory is smaller); ZB-H2 min(2(p - r) - 1, M)
// (its first worker's (2p - 1) M_B). Interleaved:V counts model chunks, not
// micro-batches: Megatron-LM's warm-up 2(p - r - 1) + (V - 1) p plus the
// one in steady state, at most M V, each chunk holding 1/V of the stage.
int in_flight(const ParallelSpec& p, int stage);

// Per micro-batch on one stage: forward, backward of the inputs (with the
// recomputation a strategy adds), backward of the weights, in seconds.
struct StageTimes {
  double f = 0, b = 0, w = 0;
  double total() const { return f + b + w; }
};
// The step's idle time of a pipeline whose slowest stage takes `slowest` per
// micro-batch: (p - 1)(F + B + W) for GPipe and 1F1B, that over V for
// interleaved:V, (p - 1)(F + B - W) for ZB-H1 and (p - 1)(F + B - 2W), not
// below 0, for ZB-H2 (Qi et al. 2023, Table 2).
double bubble_seconds(const ParallelSpec& p, const StageTimes& slowest);
// The step: M micro-batches on the slowest stage plus the bubble.
double step_seconds(const ParallelSpec& p, const StageTimes& slowest);

}  // namespace remat
