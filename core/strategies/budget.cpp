// budget:BYTES for chains: the least recompute FLOPs of a persistent nested
// schedule whose peak fits (nested_checkpoints.h, Beaumont et al.'s DP in
// this project's memory model). Where the chain is too long for the exact
// tables, the grouped approximation is compared with the single-level
// segment DP (chain_segments.h) and the better one is used.
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/factories.h"
#include "core/strategies/nested_checkpoints.h"

namespace remat {
namespace {

class Budget final : public Strategy {
 public:
  explicit Budget(uint64_t budget) : budget_(budget) {}
  std::string name() const override { return "budget:" + std::to_string(budget_); }
  Schedule schedule(const Model& m) const override {
    check(m);
    NestedPlan plan = plan_nested_chain(m, budget_);
    // The DP counts A(v) and G(v) only: with aux(v) or views in the chain its
    // plan is a candidate the simulator must confirm, never a proof.
    bool plain = true;
    for (int v = 0; v < m.size(); ++v) plain = plain && m.op(v).aux_bytes == 0 && !m.op(v).view;
    if (!plain) {
      plan.proven = false;
      if (plan.found && simulate(m, with_frees(m, plan.compute, name())).peak_bytes > budget_) plan.found = false;
    }
    if (plan.proven) {
      if (!plan.found)
        throw InputError("budget: " + std::to_string(budget_) + " bytes is infeasible for model '" + m.name +
                         "'; the smallest feasible budget is " + std::to_string(nested_min_budget(m)) + " bytes");
      return with_frees(m, plan.compute, name());
    }
    // Approximate: the better of the grouped nested plan and the checkpoint set.
    Schedule best;
    double best_flops = 0;
    if (plan.found) best = with_frees(m, plan.compute, name()), best_flops = simulate(m, best).recompute_flops;
    std::vector<int> ckpt;
    bool single_fits = false;
    if (chain_budget_dp(m, budget_, ckpt)) {
      Schedule single = segment_schedule(m, ckpt, name());
      const Simulation sim = simulate(m, single);
      single_fits = sim.peak_bytes <= budget_;
      if (single_fits && (!plan.found || sim.recompute_flops < best_flops)) best = std::move(single), best_flops = sim.recompute_flops;
    }
    if (!plan.found && !single_fits && !plain)
      throw InputError("budget: no schedule within " + std::to_string(budget_) + " bytes was found for model '" + m.name +
                       "' (its dynamic programs do not count aux(v) or views; optimal:" + std::to_string(budget_) +
                       " searches exactly)");
    if (!plan.found && !single_fits) {
      throw InputError("budget: no schedule within " + std::to_string(budget_) + " bytes was found for model '" + m.name +
                       "' (at this size the search is approximate); the least budget it finds one for is " +
                       std::to_string(std::min(nested_min_budget(m), chain_min_budget(m))) + " bytes");
    }
    if (!plain) {
      best.note = "approximate: the dynamic programs do not count aux(v) or views; the simulator confirms it fits, not proven least";
      return best;
    }
    best.note = "approximate at this size (" + std::to_string(plan.candidates) + " of " + std::to_string(m.loss() - 1) +
                " layers as checkpoint candidates, memory in " + std::to_string(plan.unit) +
                "-byte units): fits, not proven least";
    return best;
  }

  // The plan comes out of the DP: bounded, not counted (running the DP to
  // count would cost as much as schedule()). Every plan here, nested, grouped
  // or single-level, is n backward steps (n = the loss), each preceded by a
  // run of forward steps in increasing op order from a stored tensor: at most
  // j ops before bwd j, so at most n(n+1)/2 forward steps in all (what
  // recompute-all takes), every one of an op with aux(v) when the chain has
  // any.
  ScheduleSize size(const Model& m, uint64_t) const override {
    check(m);
    const auto n = static_cast<uint64_t>(m.loss());
    const uint64_t fwd = n * (n + 1) / 2;
    bool aux = false;
    for (int v = 1; v < m.size() && !aux; ++v) aux = m.op(v).aux_bytes > 0;
    return {instructions_with_frees(m, fwd, aux ? fwd : 0), ScheduleSize::Bound::AtMost};
  }

 private:
  static void check(const Model& m) {
    if (!is_chain(m))
      throw InputError("budget needs a chain (every op reading only the one before it); model '" + m.name +
                       "' branches: use optimal:BYTES");
    if (m.loss() > 4000)
      throw InputError("budget: model '" + m.name + "' has " + std::to_string(m.loss()) +
                       " layers; the dynamic program is limited to 4000");
  }
  uint64_t budget_;
};

}  // namespace

std::unique_ptr<Strategy> make_budget(uint64_t budget) { return std::make_unique<Budget>(budget); }

}  // namespace remat
