// Rematerialization of any DAG as a mixed-integer program (Checkmate, Jain et
// al. 2020) in this project's memory model, solved with CBC when the build has
// it (REMAT_WITH_MILP; docs/strategies.md gives the formulation).
//
// The family it searches, "general schedules": the forward pass computes each
// op once, in op order; the backward steps run in reverse op order; before
// each backward step any ops may be recomputed (each at most once, in op
// order) and any tensor kept or freed. Every schedule the app's other
// strategies make is one of them; a checkpoint set is the special case where
// a tensor, once recomputed, is kept until its segment's backward is done.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

// The formulation grows as the square of the ops (a stage per backward step,
// a decision per op in each), and CBC's root (presolve, first LP, cuts) does
// not stop at the time limit. On this project's shared 2-core machine the
// root took 7-17 s for transformer:4 (52 ops, ~55,000 nonzeros), overran a
// 20 s limit by 67 s on transformer:8 (~180,000), and had not finished after
// 11 minutes on transformer:12 (~470,000): about the square of the nonzeros.
// So the MILP is attempted only when its matrix has at most
// kMilpNonzerosIn45Seconds * sqrt(seconds / 45) nonzeros (status TooLarge
// otherwise, the sizes in `note`): transformer:4 from 30 s of MILP time on.
constexpr double kMilpNonzerosIn45Seconds = 67500;
double milp_nonzeros_allowed(double seconds);

struct MilpResult {
  enum class Status {
    NotBuilt,    // this build has no MILP solver
    Optimal,     // proven least recompute FLOPs over the family
    Feasible,    // the time limit stopped it: a schedule, `gap` from the bound
    Infeasible,  // proven: no schedule of the family fits
    NoSolution,  // the time limit stopped it before any schedule was found
    TooLarge,    // its matrix is too large for the time limit (milp_too_large): not attempted
  };
  Status status = Status::NotBuilt;
  std::vector<Instr> compute;    // fwd/bwd program (with_frees adds the frees)
  double recompute_flops = 0;    // of `compute`
  double bound = 0;              // lower bound on the family's least recompute FLOPs
  double gap = 0;                // (recompute_flops - bound) / recompute_flops, 0 when proven
  // The same distance over the FLOPs of the whole training step (one forward,
  // one backward, plus recompute_flops): what Checkmate's objective measures.
  double step_gap = 0;
  uint64_t peak = 0;             // the peak the MILP's own memory accounting gives `compute`
  bool warm_started = false;      // the warm start was a program of the family within the budget, given to the solver
  int binaries = 0, rows = 0;
  int64_t columns = 0, nonzeros = 0;
  std::string note;              // TooLarge: the sizes and the limit
  double seconds = 0;
};

// "CBC 2.10.8", or "" when the build has no MILP solver.
std::string milp_solver_name();

// Why the MILP is not attempted on `model` within `seconds` ("" when it is):
// its matrix has more than milp_nonzeros_allowed(seconds) nonzeros. Counts
// them by building the formulation, unless the stages alone are too many.
std::string milp_too_large(const Model& model, uint64_t budget, double seconds);

// Least recompute FLOPs within `budget` bytes. `warm_start`: a fwd/bwd program
// of the family (e.g. the branch and bound's) the solver starts from; ignored
// when it is not one.
MilpResult solve_milp(const Model& model, uint64_t budget, double seconds, const std::vector<Instr>* warm_start = nullptr);

// The memory the MILP's accounting gives a program of the family (peak), for
// checking it against the simulator; throws std::invalid_argument when the
// program is not of the family.
uint64_t milp_accounted_peak(const Model& model, const std::vector<Instr>& compute);

}  // namespace remat
