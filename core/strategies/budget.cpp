// budget:BYTES for chains of unequal layers: the checkpoint set with the least
// recompute FLOPs whose peak fits (Chen et al. 2016's segment DP, made exact
// for this project's memory model by chain_segments.h).
#include "core/checkpoint_schedule.h"
#include "core/errors.h"
#include "core/model.h"
#include "core/simulator.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

class Budget final : public Strategy {
 public:
  explicit Budget(uint64_t budget) : budget_(budget) {}
  std::string name() const override { return "budget:" + std::to_string(budget_); }
  Schedule schedule(const Model& m) const override {
    check(m);
    std::vector<int> ckpt;
    if (!chain_budget_dp(m, budget_, ckpt))
      throw InputError("budget: " + std::to_string(budget_) + " bytes is infeasible for model '" + m.name +
                       "'; the smallest feasible budget is " + std::to_string(chain_min_budget(m)) + " bytes");
    return segment_schedule(m, ckpt, name());
  }

  // The checkpoint set comes out of the DP: bounded, not counted.
  ScheduleSize size(const Model& m, uint64_t) const override {
    check(m);
    return segment_schedule_bound(m);
  }

 private:
  static void check(const Model& m) {
    if (!is_chain(m))
      throw InputError("budget needs a chain (every op reading only the one before it); model '" + m.name +
                       "' branches: use optimal:BYTES");
    if (m.loss() > 4000)
      throw InputError("budget: model '" + m.name + "' has " + std::to_string(m.loss()) +
                       " layers; the exact DP is limited to 4000");
  }
  uint64_t budget_;
};

}  // namespace

std::unique_ptr<Strategy> make_budget(uint64_t budget) { return std::make_unique<Budget>(budget); }

}  // namespace remat
