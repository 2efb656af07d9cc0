// A lower bound on the least recompute FLOPs of any general schedule
// (milp_schedule.h's family) within a byte budget, from a small integer
// program: the residency relaxation.
//
// In any such schedule each storage v that a backward step saves, or whose op
// keeps aux(v), is either recomputed at least once (at least fwd_flops(v)) or
// never: then it stays resident from its forward step until the last backward
// step that reads it, and aux(v) until bwd v. Choosing which, so that what
// must be resident at every forward step and at every backward step fits the
// budget, is a covering problem with one binary per such storage; its least
// cost bounds every schedule's, because it ignores what recomputation itself
// needs (its inputs, and memory while it runs). Where the best schedule only
// drops tensors whose inputs are still there (the usual case at 80-90% of
// store-all's peak) the bound is met, and proves it least; the MILP's LP
// relaxation, which can keep a fraction of a tensor, cannot.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

struct ResidencyBound {
  enum class Status {
    NotBuilt,    // this build has no MILP solver
    Solved,      // `bound` is the relaxation's least cost
    TimeLimit,   // stopped: `bound` is the solver's bound on it (still valid, weaker)
    Infeasible,  // what every schedule must hold exceeds the budget somewhere: none fits
    TooLarge,    // over kResidencyNonzeros: not attempted (`note` says how large)
  };
  Status status = Status::NotBuilt;
  double bound = 0;           // FLOPs: no general schedule within the budget recomputes less
  std::vector<int> recomputed;  // Solved: the storages the relaxation's optimum recomputes
  // A general schedule from the relaxation's solutions (a fwd/bwd program;
  // with_frees adds the frees): each recomputed storage once, at its first
  // need. `fits`: within the budget; then it is least when its FLOPs meet
  // the bound. The optimum's schedule can overrun the budget (the relaxation
  // leaves out some of what stays for later recomputation, and what
  // recomputation itself holds); then solutions with the rows of the steps
  // it overran lowered by the overrun are tried, and each storage the
  // fitting one recomputes is kept instead where it still fits.
  std::vector<Instr> compute;
  bool fits = false;
  double recompute_flops = 0;  // of `compute`
  uint64_t peak = 0;           // of `compute`, in the simulator
  int binaries = 0, rows = 0;
  int64_t nonzeros = 0;
  std::string note;  // TooLarge: the size
  double seconds = 0;
};

// Its rows grow as the square of the ops (a row per step, a term per storage
// held across it): transformer:12 (148 ops) has about 40,000 nonzeros,
// chain:1000 about a million. Above this it is not attempted: CBC's root on
// it would not finish within any time limit someone waits for.
constexpr int64_t kResidencyNonzeros = 250000;

ResidencyBound residency_bound(const Model& model, uint64_t budget, double seconds);

// The general schedule residency_bound makes of a choice of storages to
// recompute (a fwd/bwd program; with_frees adds the frees): the forward
// pass, then before each bwd b the chosen storages it reads, with the chosen
// inputs they need, each recomputed once at its first need.
std::vector<Instr> residency_schedule(const Model& model, const std::vector<int>& recomputed);

// Whether `flops` (a schedule's recompute FLOPs) meets `bound`: equal up to
// the rounding of summing the same FLOPs in another order.
bool meets_bound(double flops, double bound);

}  // namespace remat
