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
// enumerated per segment between cuts (repeated_blocks.h) and combined along
// the chain of segments, carrying whether a later segment's recomputation
// reads the cut between them (then the segment before holds that cut at the
// step or recomputes it too).
//
// The least choice is also a schedule: the residency schedule
// (residency_bound.h) of the storages it recomputes, each recomputed once,
// at its first need. Its recompute FLOPs are the bound's; where its peak fits
// the budget (the step is where the peak is, and the recomputations later fit
// in what the loss's tensors and gradients leave) it is least over general
// schedules, proven. (GPT-2 at attention-core's peak is such a case: its
// peak is the first backward step, the 196 MiB logits and their gradient.)
#pragma once
#include <cstdint>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

struct FirstStepBound {
  // false: a segment had more than kFirstStepChoices choices to enumerate, or
  // the time limit (or the caller's cancel) stopped the enumeration
  bool computed = false;
  bool infeasible = false;  // what the step must hold exceeds the budget whatever is recomputed
  double bound = 0;          // FLOPs
  // The bound is over exact bytes (false: the chain's fronts were thinned,
  // some bytes rounded down, which only lowers it).
  bool exact = true;
  // The row's least choice as a schedule: a fwd/bwd program (with_frees adds
  // the frees). Made where asked and the row is feasible.
  std::vector<Instr> compute;
  std::vector<int> recomputed;  // its storages recomputed after the step, sorted
  bool fits = false;            // its peak is within the budget
  double recompute_flops = 0;   // of `compute` (the bound's, but for the order of summing)
  uint64_t peak = 0;            // of `compute`, in the simulator
  double seconds = 0;
};

// Per segment, at most 2^this choices are enumerated.
constexpr int kFirstStepChoices = 20;

// `schedule`: also make the schedule (above); else only the bound. `seconds`:
// the segments' enumeration stops there (then nothing is computed).
FirstStepBound first_step_bound(const Model& model, uint64_t budget, bool schedule = true, double seconds = 1e9);

}  // namespace remat
