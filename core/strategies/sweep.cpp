#include "core/strategies/sweep.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "core/checkpoint_schedule.h"
#include "core/errors.h"
#include "core/model.h"
#include "core/simulator.h"
#include "core/spec_parse.h"
#include "core/strategies/chain_segments.h"
#include "core/strategies/optimal.h"
#include "core/strategies/strategies.h"
#include "core/strategy.h"

namespace remat {
namespace {

std::vector<std::string> named_specs(const Model& m) {
  std::vector<std::string> s{"store-all", "recompute-all", "sqrt", "auto", "selective"};
  if (is_chain(m)) {
    const int n = m.loss();
    for (int c : {2, static_cast<int>(std::ceil(std::log2(std::max(2, n)))), sqrt_interval(m)})
      s.push_back("revolve:" + std::to_string(c));
  }
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

std::string manual_spec(const std::vector<int>& ckpt) {
  if (ckpt.empty()) return "store-all";
  std::string s = "manual:";
  for (std::size_t i = 0; i < ckpt.size(); ++i) s += (i ? "," : "") + std::to_string(ckpt[i]);
  return s;
}

}  // namespace

std::vector<NamedPoint> named_points(const Model& m, const InstructionLimit& limit, std::vector<std::string>* notes) {
  std::vector<NamedPoint> named;
  for (const auto& spec : named_specs(m)) {
    try {
      const Simulation s = simulate(m, bounded_schedule(*make_strategy(spec), m, limit), {.timeline = false});
      named.push_back({spec, s.peak_bytes, s.overhead, s.recompute_flops});
    } catch (const ScheduleTooLarge& e) {
      if (notes) notes->push_back(spec + " left out: " + e.what());
    } catch (const InputError&) {  // chain-only strategies on a DAG
    }
  }
  return named;
}

std::vector<uint64_t> auto_budgets(const std::vector<NamedPoint>& named, int count) {
  auto peak_of = [&](const std::string& spec) {
    for (const NamedPoint& n : named)
      if (n.spec == spec) return n.peak;
    throw std::logic_error("auto_budgets: no " + spec + " among the named points");
  };
  if (std::none_of(named.begin(), named.end(), [](const NamedPoint& n) { return n.spec == "store-all"; }))
    throw InputError("automatic budgets run up to store-all's peak, and store-all was left out as too large to "
                     "simulate; give the budgets (B1,B2,...) instead");
  // recompute-all (the least memory) may have been left out as too large.
  const bool has_recompute = std::any_of(named.begin(), named.end(), [](const NamedPoint& n) { return n.spec == "recompute-all"; });
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

std::vector<uint64_t> parse_budgets(const std::vector<NamedPoint>& named, const std::string& list) {
  if (list == "auto") return auto_budgets(named);
  std::vector<uint64_t> b;
  for (const auto& f : split(list, ',')) b.push_back(parse_bytes(f, "--budgets: budget"));
  if (b.empty()) throw InputError("--budgets: expected 'auto' or a comma-separated list of byte counts");
  return b;
}

SweepResult sweep(const Model& m, std::vector<uint64_t> budgets, const SweepOptions& o) {
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  SweepResult r;
  const double denom = m.forward_flops() + m.backward_flops();
  auto overhead = [&](double f) { return denom > 0 ? f / denom : 0.0; };
  r.notes = o.notes;
  r.named = o.named.empty() ? named_points(m, o.limit, &r.notes) : o.named;
  const bool chain = is_chain(m) && m.loss() <= 4000;
  // Every set the DAG search tries is a segment schedule: left out when the
  // longest could be over the limit.
  const ScheduleSize longest = segment_schedule_bound(m);
  const bool dag_search = !chain && longest.instructions <= o.limit.max;
  if (!chain && !dag_search)
    r.notes.push_back(std::string("the checkpoint-set search per budget left out: ") + ScheduleTooLarge(longest, o.limit).what() +
                      "; the budgets show the named strategies only");
  const int total = static_cast<int>(budgets.size());
  for (int i = 0; i < total; ++i) {
    if (o.cancel && o.cancel->load()) break;
    SweepPoint p;
    p.budget = budgets[static_cast<std::size_t>(i)];
    auto take = [&](const std::string& spec, uint64_t peak, double flops) {
      if (peak <= p.budget && (!p.feasible || flops < p.recompute_flops)) {
        p = {p.budget, true, spec, peak, overhead(flops), flops};
      }
    };
    for (const auto& n : r.named) take(n.spec, n.peak, n.recompute_flops);
    if (chain) {
      std::vector<int> ckpt;
      if (chain_budget_dp(m, p.budget, ckpt)) {
        const Simulation s = simulate(m, segment_schedule(m, ckpt, "budget"), {.timeline = false});
        take("budget:" + std::to_string(p.budget), s.peak_bytes, s.recompute_flops);
      }
    } else if (dag_search) {
      const OptimalResult opt = optimal_search(m, p.budget, o.optimal_seconds);
      if (opt.found) take(manual_spec(opt.checkpoints), opt.peak, opt.recompute_flops);
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
  j["budgets"] = nlohmann::json::array();
  for (const auto& p : r.budgets) {
    nlohmann::json e{{"budget_bytes", p.budget}, {"feasible", p.feasible}};
    if (p.feasible) {
      e["spec"] = p.spec;
      e["peak_bytes"] = p.peak;
      e["overhead"] = p.overhead;
      e["recompute_flops"] = p.recompute_flops;
    }
    j["budgets"].push_back(e);
  }
  j["strategies"] = nlohmann::json::array();
  for (const auto& n : r.named) j["strategies"].push_back({{"spec", n.spec}, {"peak_bytes", n.peak}, {"overhead", n.overhead}});
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

}  // namespace remat
