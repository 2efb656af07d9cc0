#include "core/analysis/sweep.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/base/spec_parse.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/compress.h"
#include "core/strategies/factories.h"
#include "core/strategies/optimal.h"
#include "core/strategies/optimal_schedule.h"
#include "core/strategies/repeated_blocks.h"
#include "core/strategies/registry.h"

namespace remat {
namespace {

std::vector<StrategySpec> named_specs(const Model& m) {
  std::vector<StrategySpec> s;
  for (const char* name : {"store-all", "recompute-all", "sqrt", "auto", "selective"}) s.push_back(strategy_spec(name));
  // The hand-written policies for real networks, where the graph has them
  // (attention cores, blocks of more than one op).
  if (attention_core_absent(m).empty()) s.push_back(strategy_spec("attention-core"));
  if (blocks_absent(m).empty()) s.push_back(strategy_spec("blocks"));
  if (is_chain(m)) {
    const int n = m.loss();
    for (int c : {2, static_cast<int>(std::ceil(std::log2(std::max(2, n)))), sqrt_interval(m)})
      s.push_back(strategy_spec("revolve", {c}));
  }
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

// `spec` as the sweep makes it: with the modifier +compress:DTYPE when asked.
StrategySpec with_packing(StrategySpec spec, Packing p) {
  return p == Packing::None ? spec : modified_spec(std::move(spec), "compress", packing_name(p));
}

// A schedule as the sweep judges it: with compressed checkpoints when asked.
Simulation simulate_point(const Model& m, Schedule s, Packing p) {
  if (p != Packing::None) s = with_compression(m, std::move(s), p);
  return simulate(m, s, {.timeline = false});
}

// A checkpoint set, recreated by manual:...; none is store-all.
StrategySpec manual_spec(const std::vector<int>& ckpt) {
  return ckpt.empty() ? strategy_spec("store-all") : strategy_spec("manual", {ckpt.begin(), ckpt.end()});
}

}  // namespace

std::vector<NamedPoint> named_points(const Model& m, const InstructionLimit& limit, std::vector<std::string>* notes,
                                     Packing compress) {
  std::vector<NamedPoint> named;
  for (const auto& base : named_specs(m)) {
    const StrategySpec spec = with_packing(base, compress);
    try {
      const Simulation s = simulate(m, bounded_schedule(*make_strategy(spec), m, limit), {.timeline = false});
      named.push_back({spec, s.peak_bytes, s.overhead, s.recompute_flops, s.compressed_bytes});
    } catch (const ScheduleTooLarge& e) {
      if (notes) notes->push_back(spec.str() + " left out: " + e.what());
    } catch (const InputError&) {  // chain-only strategies on a DAG
    }
  }
  return named;
}

std::vector<uint64_t> auto_budgets(const std::vector<NamedPoint>& named, int count) {
  // A named point's strategy without the +compress:DTYPE it may carry.
  auto is = [](const NamedPoint& n, const std::string& base) {
    return n.spec.unmodified() == strategy_spec(base);
  };
  auto peak_of = [&](const std::string& spec) {
    for (const NamedPoint& n : named)
      if (is(n, spec)) return n.peak;
    throw std::logic_error("auto_budgets: no " + spec + " among the named points");
  };
  if (std::none_of(named.begin(), named.end(), [&](const NamedPoint& n) { return is(n, "store-all"); }))
    throw InputError("automatic budgets run up to store-all's peak, and store-all was left out as too large to "
                     "simulate; give the budgets (B1,B2,...) instead");
  // recompute-all (the least memory) may have been left out as too large.
  const bool has_recompute = std::any_of(named.begin(), named.end(), [&](const NamedPoint& n) { return is(n, "recompute-all"); });
  const uint64_t least = std::min_element(named.begin(), named.end(), [](const NamedPoint& a, const NamedPoint& b) {
                           return a.peak < b.peak;
                         })->peak;
  const uint64_t lo = has_recompute ? peak_of("recompute-all") : least, hi = peak_of("store-all");
  std::vector<uint64_t> b;
  for (int i = 0; i < count; ++i)
    b.push_back(lo + static_cast<uint64_t>(std::llround(static_cast<double>(hi - lo) * i / std::max(1, count - 1))));
  // Without a budget at each named strategy's peak, the front would hold the
  // overhead of the sample below until the next sample, drawn above a strategy
  // that does better in between.
  for (const NamedPoint& n : named) b.push_back(n.peak);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

std::vector<uint64_t> parse_budgets(const std::vector<NamedPoint>& named, const std::string& list,
                                    uint64_t store_all_peak) {
  if (list == "auto") return auto_budgets(named);
  std::vector<uint64_t> b;
  for (const auto& f : split(list, ',')) b.push_back(parse_budget(f, "--budgets: budget", store_all_peak));
  if (b.empty()) throw InputError("--budgets: expected 'auto' or a comma-separated list of byte counts or shares");
  return b;
}

SweepResult sweep(const Model& m, std::vector<uint64_t> budgets, const SweepOptions& o) {
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  SweepResult r;
  const double denom = m.forward_flops() + m.backward_flops();
  auto overhead = [&](double f) { return denom > 0 ? f / denom : 0.0; };
  r.notes = o.notes;
  r.compress = o.compress;
  r.named = o.named.empty() ? named_points(m, o.limit, &r.notes, o.compress) : o.named;
  const bool chain = is_chain(m) && m.loss() <= 4000;
  // The DAG search (optimal's branch and bound, then the MILP) is left out
  // when the longest schedule it could return is over the limit.
  const ScheduleSize longest = make_optimal(0, o.optimal_seconds)->size(m, o.limit.max);
  const bool dag_search = !chain && longest.instructions <= o.limit.max;
  if (!chain && !dag_search)
    r.notes.push_back(std::string("the optimal search per budget left out: ") + ScheduleTooLarge(longest, o.limit).what() +
                      "; the budgets show the named strategies only");
  bool nested_left_out = false;  // one note, not one per budget
  const int total = static_cast<int>(budgets.size());
  for (int i = 0; i < total; ++i) {
    if (o.cancel && o.cancel->load()) break;
    SweepPoint p;
    p.budget = budgets[static_cast<std::size_t>(i)];
    auto take = [&](const StrategySpec& spec, uint64_t peak, double flops, uint64_t compressed) {
      if (peak <= p.budget && (!p.feasible || flops < p.recompute_flops)) {
        p = {p.budget, true, spec, peak, overhead(flops), flops, compressed};
      }
    };
    for (const auto& n : r.named) take(n.spec, n.peak, n.recompute_flops, n.compressed_bytes);
    if (chain) {
      SweepPoint single;
      single.budget = p.budget;
      std::vector<int> ckpt;
      if (chain_budget_dp(m, p.budget, ckpt)) {
        // A chain's segment schedules are at most twice its forward pass
        // (segment_schedule_bound): not checked against the limit.
        const Simulation s = simulate_point(m, segment_schedule(m, ckpt, "budget"), o.compress);
        single = {p.budget,          true, with_packing(manual_spec(ckpt), o.compress), s.peak_bytes,
                  overhead(s.recompute_flops), s.recompute_flops, s.compressed_bytes};
        take(single.spec, s.peak_bytes, s.recompute_flops, s.compressed_bytes);
      }
      if (!r.single_level.empty() && r.single_level.back().feasible &&
          (!single.feasible || r.single_level.back().recompute_flops < single.recompute_flops)) {
        single = r.single_level.back();
        single.budget = p.budget;
      }
      r.single_level.push_back(single);
      // budget:B nests checkpoints (multi-level); it is never above one level.
      const StrategySpec spec = with_packing(strategy_spec("budget", {static_cast<int64_t>(p.budget)}), o.compress);
      try {
        // budget's stated length is a bound, recompute-all's N(N+1)/2 forward
        // steps, far above what its plans take. On a chain of at most 4000
        // ops the schedule is at most ~16M instructions: it is made, and its
        // real length checked against the limit before it is simulated.
        const Schedule schedule = make_strategy(spec)->schedule(m);
        if (schedule.code.size() > o.limit.max)
          throw ScheduleTooLarge({schedule.code.size(), ScheduleSize::Bound::Exact}, o.limit);
        const Simulation s = simulate(m, schedule, {.timeline = false});
        take(spec, s.peak_bytes, s.recompute_flops, s.compressed_bytes);
      } catch (const ScheduleTooLarge& e) {
        if (!nested_left_out)
          r.notes.push_back(std::string("nested checkpoints (budget:B) left out: ") + e.what() +
                            "; the budgets show one level of checkpoints only");
        nested_left_out = true;
      } catch (const InputError&) {  // nothing fits this budget
      }
    } else if (dag_search) {
      const OptimalOutcome opt = optimal_schedule(m, p.budget, o.optimal_seconds);
      if (opt.found) {
        // A proven or chosen checkpoint set is recreated by manual:...; the
        // MILP's or the residency bound's schedule by the optimal spec that
        // found it, and so is dtr's compute with optimal's frees (they free
        // earlier than dtr's evictions: dtr:B alone peaks higher).
        const bool named_exactly =
            opt.from_named && !strategy_info(*opt.from_named).decides_live;
        const StrategySpec spec =
            named_exactly ? *opt.from_named
            : opt.from_milp || opt.from_residency || opt.from_first_step || opt.from_named
                ? strategy_spec("optimal", {static_cast<int64_t>(p.budget), static_cast<int64_t>(std::ceil(o.optimal_seconds))})
                : manual_spec(opt.sets.checkpoints);
        const Simulation s = simulate_point(m, with_frees(m, opt.compute, "optimal"), o.compress);
        take(with_packing(spec, o.compress), s.peak_bytes, opt.recompute_flops, s.compressed_bytes);
      }
    }
    // A schedule that fits a smaller budget fits this one: keep the front monotone.
    if (!r.budgets.empty() && r.budgets.back().feasible &&
        (!p.feasible || r.budgets.back().recompute_flops < p.recompute_flops)) {
      const uint64_t b = p.budget;
      p = r.budgets.back();
      p.budget = b;
    }
    r.budgets.push_back(p);
    if (o.progress) o.progress(i + 1, total);
  }
  return r;
}

nlohmann::json sweep_json(const Model& m, const SweepResult& r) {
  nlohmann::json j{{"model", m.name}};
  j["compress"] = r.compress == Packing::None ? nlohmann::json() : nlohmann::json(std::string(packing_name(r.compress)));
  j["budgets"] = nlohmann::json::array();
  for (const auto& p : r.budgets) {
    nlohmann::json e{{"budget_bytes", p.budget}, {"feasible", p.feasible}};
    if (p.feasible) {
      e["spec"] = p.spec.str();
      e["peak_bytes"] = p.peak;
      e["overhead"] = p.overhead;
      e["recompute_flops"] = p.recompute_flops;
      e["compressed_bytes"] = p.compressed_bytes;
    }
    j["budgets"].push_back(e);
  }
  j["strategies"] = nlohmann::json::array();
  for (const auto& n : r.named)
    j["strategies"].push_back(
        {{"spec", n.spec.str()}, {"peak_bytes", n.peak}, {"overhead", n.overhead}, {"compressed_bytes", n.compressed_bytes}});
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

}  // namespace remat
