// A lower bound on the recompute FLOPs of every general schedule
// (milp_schedule.h's family) within a byte budget, from one instruction: the
// first backward step (the loss's), where the whole forward pass's saved
// tensors wait. There every general schedule holds what store-all holds there
// but for the tensors it recomputes later, plus what those recomputations
// read and it does not recompute too; so, per storage, "held" or "recomputed
// later" (at least its forward FLOPs), and an op's aux is held unless the op
// is recomputed. Unlike the residency bound (residency_bound.h), which has a
// row per step but is an integer program CBC may not close (on GPT-2, with
// twelve equal layers, its LP bound stays a fractional attention core below
// the integer optimum), this one row is solved exactly: the choices are
// enumerated per segment between cuts (repeated_blocks.h; a segment's only
// input from outside is the cut before it, taken as available) and combined
// by a knapsack over the segments, with bytes rounded down (which only lowers
// the bound).
#pragma once
#include <cstdint>

namespace remat {

struct Model;

struct FirstStepBound {
  bool computed = false;  // false: a segment had more than kFirstStepChoices choices to enumerate
  bool infeasible = false;  // what the step must hold exceeds the budget whatever is recomputed
  double bound = 0;          // FLOPs
  double seconds = 0;
};

// Per segment, at most 2^this choices are enumerated.
constexpr int kFirstStepChoices = 20;

FirstStepBound first_step_bound(const Model& model, uint64_t budget);

}  // namespace remat
