// Exact per-segment figures of checkpoint_schedule on a chain, so that the
// budget DP predicts the simulator's peak without replaying whole schedules.
#pragma once
#include <cstdint>
#include <vector>

namespace remat {

struct Model;

struct SegmentCost {
  uint64_t peak = 0;   // bytes of the segment's own tensors at its worst instruction, A(a-1) included while resident
  double flops = 0;    // recomputed forward FLOPs
  bool keeps_start = false;  // some backward step reads A(a-1): it stays resident under later segments
};

// Segment [a, b] of a chain: A(a-1) is a checkpoint (or the input), A(b) a
// checkpoint or the loss (`final`: the last segment, which recomputes nothing).
SegmentCost chain_segment(const Model& m, int a, int b);

// The predicted peak of segment_schedule(m, checkpoints) (sorted op ids).
uint64_t chain_peak(const Model& m, const std::vector<int>& checkpoints);

// Up to this many layers the DP keeps every Pareto label (exact); beyond, at
// most 32 per checkpoint (fast, feasible, not proven least).
constexpr int kExactChainLayers = 300;

// The checkpoint set (ops) minimising recompute FLOPs with predicted peak <=
// budget; empty optional-like: returns false when nothing fits.
bool chain_budget_dp(const Model& m, uint64_t budget, std::vector<int>& checkpoints, uint64_t* predicted_peak = nullptr,
                     double* flops = nullptr);
// The least budget any checkpoint set of the chain fits in.
uint64_t chain_min_budget(const Model& m);

}  // namespace remat
