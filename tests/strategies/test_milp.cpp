// The MILP over general schedules (milp_schedule.h): on small random DAGs its
// proven answer is the exhaustive search's over the same family, never below
// the least of ALL schedules whose backward runs in reverse op order
// (recomputing anything, any number of times, in any order, also during the
// forward pass), and equal to it on the presets and on the DAGs with views
// and aux; never more than the branch and bound's (checkpoint sets); and its
// schedule peaks in the simulator exactly where its own memory accounting
// says. Since an Add's inputs share its gradient (docs/memory-model.md) the
// backward needs less, and where the forward pass is what binds, a schedule
// that recomputes during the forward pass can do better than the family
// (AllSchedulesCanRecomputeInTheForwardPass).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/milp_schedule.h"
#include "core/strategies/optimal.h"
#include "core/strategies/optimal_schedule.h"
#include "core/strategies/registry.h"
#include "tests/strategies/exhaustive_dag.h"
#include "tests/strategies/strategy_test_util.h"

using namespace remat;

namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();

#define SKIP_WITHOUT_MILP() \
  if (milp_solver_name().empty()) GTEST_SKIP() << "this build has no MILP solver (REMAT_WITH_MILP: CBC not found)"

// Every budget a checkpoint set reaches, one byte below each, and the least
// any schedule could need (infeasible below it).
std::set<uint64_t> budgets_of(const Model& m) {
  std::set<uint64_t> b;
  for (const auto& r : test::all_checkpoint_sets(m)) b.insert(r.sim.peak_bytes), b.insert(r.sim.peak_bytes - 1);
  b.insert(least_possible_peak(m));
  return b;
}

// Solves, checks the schedule against the simulator, returns its FLOPs (+inf: infeasible).
double milp_least(const Model& m, uint64_t budget) {
  const MilpResult r = solve_milp(m, budget, 60);
  if (r.status == MilpResult::Status::Infeasible) return kNone;
  EXPECT_EQ(r.status, MilpResult::Status::Optimal) << m.name << " budget " << budget;
  const Simulation s = simulate(m, with_frees(m, r.compute, "milp"));
  EXPECT_EQ(s.peak_bytes, r.peak) << m.name << " budget " << budget;
  EXPECT_LE(s.peak_bytes, budget) << m.name;
  EXPECT_DOUBLE_EQ(s.recompute_flops, r.recompute_flops) << m.name;
  EXPECT_EQ(r.gap, 0.0);
  EXPECT_EQ(r.step_gap, 0.0);
  return r.recompute_flops;
}

// `all_equal`: also the least of all schedules (else never below it).
void expect_exhaustive_optimum(const Model& m, bool all_equal = true) {
  ASSERT_LE(m.size(), 16) << m.name;
  for (uint64_t budget : budgets_of(m)) {
    const double family = test::least_dag_recompute(m, budget, true);
    const double got = milp_least(m, budget);
    EXPECT_EQ(got, family) << m.name << " budget " << budget;
    const double all = test::least_dag_recompute(m, budget, false);
    if (all_equal) EXPECT_EQ(family, all) << m.name << " budget " << budget << ": all schedules";
    else EXPECT_LE(all, family) << m.name << " budget " << budget << ": all schedules";
    const OptimalResult sets = optimal_search(m, budget, 60);
    if (sets.found) EXPECT_LE(got, sets.recompute_flops) << m.name << " budget " << budget;
  }
}

}  // namespace

// (Searched beyond this test, before an Add's inputs shared its gradient:
// 120 such DAGs, 1,140 budgets, all schedules never below the family. Since,
// random1, random3 and mixed3 have budgets where they are:
// AllSchedulesCanRecomputeInTheForwardPass.)
TEST(Milp, MatchesExhaustiveSearchOnRandomDags) {
  SKIP_WITHOUT_MILP();
  for (unsigned seed = 1; seed <= 6; ++seed) expect_exhaustive_optimum(test::random_dag(seed, 7), false);
}

TEST(Milp, MatchesExhaustiveSearchOnMixedWidthDags) {
  SKIP_WITHOUT_MILP();
  for (unsigned seed = 1; seed <= 6; ++seed) expect_exhaustive_optimum(test::mixed_width_dag(seed, 7), false);
}

// random1 (x; a = tanh x, b = tanh a, c = tanh x, n = LayerNorm x, l =
// Linear n, then (x + l) + b + c and the loss) at 336 bytes: the family, whose
// forward pass computes each op once, recomputes 112 FLOPs; a schedule that
// drops c = tanh x during the forward pass and computes it again right before
// the sum that reads it (16 FLOPs), then recomputes a and b for b's backward
// (32), needs 48. The backward no longer binds there: the Adds' inputs share
// their gradients, so the forward pass's peak is what the budget meets.
TEST(Milp, AllSchedulesCanRecomputeInTheForwardPass) {
  SKIP_WITHOUT_MILP();
  const Model m = test::random_dag(1, 7);
  EXPECT_EQ(test::least_dag_recompute(m, 336, true), 112);
  EXPECT_EQ(milp_least(m, 336), 112);
  EXPECT_EQ(test::least_dag_recompute(m, 336, false), 48);
}

TEST(Milp, MatchesExhaustiveSearchOnPresets) {
  SKIP_WITHOUT_MILP();
  expect_exhaustive_optimum(make_preset("chain:8"));
  expect_exhaustive_optimum(make_preset("mlp:3:16:4"));
}

// Views (storages counted once, an owner not recomputed under its views) and
// aux(v) (made by each fwd v, kept from the last one to bwd v): the MILP's
// accounting is the simulator's, and its optimum the exhaustive search's.
TEST(Milp, MatchesExhaustiveSearchWithViewsAndAux) {
  SKIP_WITHOUT_MILP();
  int views = 0, aux = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    const Model m = test::views_aux_dag(seed, 7);
    for (int v = 0; v < m.size(); ++v) views += m.op(v).view, aux += m.op(v).aux_bytes > 0;
    expect_exhaustive_optimum(m);
  }
  EXPECT_GT(views, 8);  // the generator makes what this test is about
  EXPECT_GT(aux, 8);
}

// The wider family pays off: on a transformer block at recompute-all's peak no
// checkpoint set fits, the MILP finds a schedule, and cheaper than recompute-all.
TEST(Milp, FitsWhereNoCheckpointSetDoes) {
  SKIP_WITHOUT_MILP();
  const Model m = make_preset("transformer:1:16:4:2");
  const Simulation all = simulate(m, make_strategy("recompute-all")->schedule(m));
  EXPECT_FALSE(optimal_search(m, all.peak_bytes, 60).found);
  const double f = milp_least(m, all.peak_bytes);
  EXPECT_LT(f, all.recompute_flops);
  // (Its LayerNorms' aux makes the exhaustive search's states too many here.)
}

// A warm start from the branch and bound's schedule is taken, and changes
// nothing but the time; a program outside the family is ignored. The
// checkpoint-set generator re-creates a view alone where its storage is
// resident (the MILP recomputes views with their owners): same bytes, same
// FLOPs, so such a program is a warm start too.
TEST(Milp, WarmStartKeepsTheOptimum) {
  SKIP_WITHOUT_MILP();
  int lone_views = 0;
  std::vector<Model> models{test::mixed_width_dag(3, 7)};
  for (unsigned seed = 1; seed <= 8; ++seed) models.push_back(test::views_aux_dag(seed, 7));
  for (const Model& m : models) {
    for (uint64_t budget : budgets_of(m)) {
      const OptimalResult sets = optimal_search(m, budget, 60);
      if (!sets.found) continue;
      const Schedule s = segment_schedule(m, sets.checkpoints, "warm");
      std::vector<Instr> warm;
      for (const Instr& i : s.code)
        if (i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd) warm.push_back(i);
      // Recomputations (after the forward pass) of a view whose owner is not
      // recomputed since the last bwd.
      std::vector<char> fresh(static_cast<std::size_t>(m.size()), 0);
      for (std::size_t i = static_cast<std::size_t>(m.loss()); i < warm.size(); ++i) {
        if (warm[i].kind == InstrKind::Bwd) std::fill(fresh.begin(), fresh.end(), 0);
        if (warm[i].kind != InstrKind::Fwd) continue;
        fresh[static_cast<std::size_t>(warm[i].op)] = 1;
        lone_views += m.op(warm[i].op).view && !fresh[static_cast<std::size_t>(m.storage(warm[i].op))];
      }
      EXPECT_EQ(milp_accounted_peak(m, warm), simulate(m, s).peak_bytes) << m.name << " budget " << budget;
      const MilpResult r = solve_milp(m, budget, 60, &warm);
      EXPECT_TRUE(r.warm_started) << m.name << " budget " << budget;
      ASSERT_EQ(r.status, MilpResult::Status::Optimal);
      EXPECT_EQ(r.recompute_flops, solve_milp(m, budget, 60).recompute_flops);
    }
  }
  EXPECT_GT(lone_views, 0);  // the case this test is about occurs
  const Model m = test::mixed_width_dag(3, 7);
  const std::vector<Instr> backwards{{InstrKind::Bwd, 1}};
  EXPECT_THROW(milp_accounted_peak(m, backwards), std::invalid_argument);
}

// optimal:BYTES says in its records which solver proved what, and which
// schedule it returned: the branch and bound, the MILP, the residency bound.
TEST(Milp, OptimalRecordsEverySolver) {
  const Model m = make_preset("transformer:1:16:4:2");
  const uint64_t sqrt_peak = simulate(m, make_strategy("sqrt")->schedule(m)).peak_bytes;
  std::vector<SolverRecord> records;
  const Schedule s = make_strategy("optimal:" + std::to_string(sqrt_peak) + ":30")->schedule_with_record(m, records);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].solver, "branch and bound");
  EXPECT_EQ(records[0].family, "checkpoint sets");
  EXPECT_EQ(records[1].family, "general schedules");
  EXPECT_EQ(records[2].family, "general schedules");
  EXPECT_EQ(std::count_if(records.begin(), records.end(), [](const SolverRecord& r) { return r.chosen; }), 1);
  const auto chosen = std::find_if(records.begin(), records.end(), [](const SolverRecord& r) { return r.chosen; });
  EXPECT_DOUBLE_EQ(simulate(m, s).recompute_flops, chosen->recompute_flops);
  if (milp_solver_name().empty()) {
    EXPECT_EQ(records[0].status, "proven");
    EXPECT_EQ(records[1].status, "not in this build");
    EXPECT_EQ(records[2].status, "not in this build");
    EXPECT_TRUE(records[0].chosen);
  } else {
    // The residency bound's own schedule meets it: least over general
    // schedules, so neither other solver runs. Its schedule recomputes no
    // more than the branch and bound's proven least over checkpoint sets.
    EXPECT_EQ(records[0].status, "not needed (the residency bound's schedule meets it)");
    EXPECT_EQ(records[1].status, "not needed (the residency bound's schedule meets it)");
    EXPECT_EQ(records[2].status, "proven");
    EXPECT_TRUE(records[2].chosen);
    EXPECT_EQ(chosen->gap, 0.0);
    EXPECT_EQ(chosen->step_gap, 0.0);
    const OptimalResult sets = optimal_search(m, sqrt_peak, 30);
    ASSERT_TRUE(sets.found && sets.proven);
    EXPECT_LE(records[2].recompute_flops, sets.recompute_flops);
    EXPECT_EQ(s.note, "");
  }
}

// Below what one instruction needs on its own, no solver is asked.
TEST(Milp, InfeasibleBelowTheLargestInstruction) {
  std::string what;
  const Model m = make_preset("chain:8");
  const uint64_t floor = least_possible_peak(m, &what);
  try {
    make_strategy("optimal:" + std::to_string(floor - 1))->schedule(m);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "optimal: " + std::to_string(floor - 1) + " bytes is infeasible for model 'chain:8': " +
                                         what + " alone needs " + std::to_string(floor) + " bytes");
  }
}

// The MILP is attempted only when its matrix has at most
// kMilpNonzerosIn45Seconds * sqrt(seconds / 45) nonzeros (CBC's root ignores
// the limit, and its time grows as their square); the refusal names the
// count and the limit.
TEST(Milp, TooLargeForItsTimeLimitIsNotAttempted) {
  SKIP_WITHOUT_MILP();
  const Model m = make_preset("chain:8");
  const uint64_t budget = simulate(m, make_strategy("sqrt")->schedule(m)).peak_bytes;
  const MilpResult fits = solve_milp(m, budget, 60);
  ASSERT_EQ(fits.status, MilpResult::Status::Optimal);
  ASSERT_GT(fits.nonzeros, 0);
  const double ratio = static_cast<double>(fits.nonzeros) / kMilpNonzerosIn45Seconds;
  const double enough = 45 * ratio * ratio;  // seconds that just allow it
  EXPECT_EQ(milp_too_large(m, budget, enough * 1.01), "");
  const std::string why = milp_too_large(m, budget, enough * 0.99);
  std::string count = std::to_string(fits.nonzeros);  // with thousands separators
  for (auto at = static_cast<std::ptrdiff_t>(count.size()) - 3; at > 0; at -= 3) count.insert(static_cast<std::size_t>(at), ",");
  EXPECT_EQ(why.rfind(count + " nonzeros, over the ", 0), 0u) << why;
  const MilpResult refused = solve_milp(m, budget, enough * 0.99);
  EXPECT_EQ(refused.status, MilpResult::Status::TooLarge);
  EXPECT_EQ(refused.note, why);
  EXPECT_TRUE(refused.compute.empty());
  // optimal:BYTES then gives the branch and bound all the time, and says why.
  const Model big = make_preset("transformer:6");
  const uint64_t big_budget = simulate(big, make_strategy("store-all")->schedule(big)).peak_bytes * 9 / 10;
  std::vector<SolverRecord> records;
  make_strategy("optimal:" + std::to_string(big_budget) + ":2")->schedule_with_record(big, records);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].status.rfind("too large (", 0), 0u) << records[1].status;
  EXPECT_EQ(records[1].status, "too large (" + milp_too_large(big, big_budget, 2 * 0.9 * 3 / 4) + ")");
  EXPECT_FALSE(records[1].chosen);
}

// Both gaps come from one bound: `gap` over the recompute FLOPs, `step_gap`
// over the whole step's (forward + backward + recompute). transformer:2 at
// 80% of store-all's peak is not proven in the seconds that just admit it.
TEST(Milp, StepGapIsTheSameDistanceOverTheWholeStep) {
  SKIP_WITHOUT_MILP();
  const Model m = make_preset("transformer:2");
  const uint64_t budget = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes * 8 / 10;
  const OptimalResult sets = optimal_search(m, budget, 10);
  ASSERT_TRUE(sets.found);
  std::vector<Instr> warm;
  for (const Instr& i : segment_schedule(m, sets.checkpoints, "warm").code)
    if (i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd) warm.push_back(i);
  const double ratio = static_cast<double>(solve_milp(m, budget, 1).nonzeros + 1) / kMilpNonzerosIn45Seconds;
  const double seconds = 1.1 * 45 * ratio * ratio;
  MilpResult r = solve_milp(m, budget, 1);
  ASSERT_EQ(r.status, MilpResult::Status::TooLarge);  // 1 s admits no transformer
  r = solve_milp(m, budget, std::max(seconds, 20.0), &warm);
  ASSERT_TRUE(r.status == MilpResult::Status::Feasible || r.status == MilpResult::Status::Optimal);
  EXPECT_TRUE(r.warm_started);
  EXPECT_LE(r.recompute_flops, sets.recompute_flops);
  EXPECT_DOUBLE_EQ(r.gap, (r.recompute_flops - r.bound) / r.recompute_flops);
  EXPECT_DOUBLE_EQ(r.step_gap, (r.recompute_flops - r.bound) / (m.forward_flops() + m.backward_flops() + r.recompute_flops));
  if (r.gap > 0) EXPECT_LT(r.step_gap, r.gap);
}
