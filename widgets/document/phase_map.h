// One forward/backward phase axis shared by every strategy of a model, so that
// runs of different lengths can be shown side by side and a switch of the
// shown strategy keeps "where we are" rather than a step index that means
// something else. Every valid schedule has the same 2(n-1) progress events:
// the first fwd of each op but the input and the bwd of each op but the input.
// Phase k (0 <= k <= 2(n-1)) is "k events done"; between two events (a
// strategy's recomputations, its frees) the phase grows linearly with the step.
#pragma once
#include <cstddef>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {
struct Model;

class PhaseMap {
 public:
  PhaseMap() = default;
  PhaseMap(const Model& model, const Schedule& schedule);
  // Phase at instruction `step` (the event itself counts as done).
  double phaseAt(std::size_t step) const;
  // The instruction at `phase`; stepAt(phaseAt(t)) == t.
  std::size_t stepAt(double phase) const;
  double phaseCount() const { return static_cast<double>(anchors_.size() ? anchors_.size() - 1 : 0); }
  // Instructions of the events, in order (forward pass first events, then backward).
  const std::vector<std::size_t>& events() const { return events_; }

 private:
  std::vector<std::size_t> events_;
  // anchors_[k]: the instruction where phase k is reached, as a signed position
  // (-1: before the first instruction; the last anchor is the last instruction).
  std::vector<long long> anchors_;
};

}  // namespace remat
