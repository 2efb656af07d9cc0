// Nested (multi-level) checkpointing for chains under a byte budget: the
// dynamic program of Beaumont, Eyraud-Dubois, Herrmann, Joly and Shilova
// ("Optimal checkpointing for heterogeneous chains", 2019), in this project's
// memory model.
//
// A persistent schedule reverses a segment [s, e] (A(s) stored, G(e)
// resident) either by a backward step straight away, or by advancing from
// A(s) to some A(c), storing it, reversing [c, e] with A(s) held, then [s, c].
// A stored A(c) is either kept for bwd c ("its full saved set": the layer's
// backward reads its own output) or dropped after [c, e] and recomputed from
// A(c-1) ("only as an input"). Memory is counted exactly as with_frees and the
// simulator count it: each tensor lives until its last read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

struct NestedPlan {
  bool found = false;
  // The least recompute FLOPs of any persistent schedule within the budget:
  // memory counted in exact bytes and every op a candidate checkpoint. False
  // when the chain was too large for that (see `unit`, `candidates`): then the
  // plan fits but is not proven least.
  bool proven = false;
  double recompute_flops = 0;
  uint64_t unit = 1;        // memory quantum the DP counted in (sizes rounded up to it)
  int candidates = 0;       // ops the DP could store (all of 1..N-1 when exact)
  std::vector<Instr> compute;  // fwd/bwd program; with_frees() adds the frees
};

// Chains only (is_chain). Fits `budget` whenever found. On a chain of equal
// Dense-like layers the answer is revolve's closed form (the same least, in
// O(n)); `closed_form` = false runs the tables anyway (for tests).
NestedPlan plan_nested_chain(const Model& chain, uint64_t budget, bool closed_form = true);
// The least budget plan_nested_chain finds a schedule for (exact when its
// plans are `proven`).
uint64_t nested_min_budget(const Model& chain);

}  // namespace remat
