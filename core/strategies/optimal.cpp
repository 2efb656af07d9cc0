#include "core/strategies/optimal.h"

#include <chrono>
#include <random>
#include <limits>
#include <string>

#include "core/checkpoint_schedule.h"
#include "core/errors.h"
#include "core/model.h"
#include "core/simulator.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

struct Eval {
  uint64_t peak;
  double flops;
};

Eval evaluate(const Model& m, const std::vector<int>& ckpt) {
  const Simulation s = simulate(m, segment_schedule(m, ckpt, "optimal"));
  return {s.peak_bytes, s.recompute_flops};
}

class Optimal final : public Strategy {
 public:
  Optimal(uint64_t budget, double limit) : budget_(budget), limit_(limit) {}
  std::string name() const override { return "optimal:" + std::to_string(budget_); }
  Schedule schedule(const Model& m) const override {
    const OptimalResult r = optimal_search(m, budget_, limit_);
    if (!r.found)
      throw InputError("optimal: " + std::to_string(budget_) + " bytes is infeasible for model '" + m.name +
                       "'; the smallest peak found is " + std::to_string(r.least_peak) + " bytes");
    return segment_schedule(m, r.checkpoints, name());
  }

 private:
  uint64_t budget_;
  double limit_;
};

}  // namespace

OptimalResult optimal_search(const Model& m, uint64_t budget, double time_limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_limit_s));
  OptimalResult r;
  r.least_peak = std::numeric_limits<uint64_t>::max();
  auto consider = [&](const std::vector<int>& ckpt) {
    const Eval e = evaluate(m, ckpt);
    ++r.evaluated;
    r.least_peak = std::min(r.least_peak, e.peak);
    if (e.peak <= budget && (!r.found || e.flops < r.recompute_flops)) {
      r.found = true;
      r.checkpoints = ckpt;
      r.recompute_flops = e.flops;
      r.peak = e.peak;
      return true;
    }
    return false;
  };
  const int n = m.loss();
  // Seeds: the named families.
  consider({});
  for (int k = 1; k < n; ++k) consider(every_k_checkpoints(m, k));
  consider(auto_checkpoints(m));
  consider(selective_checkpoints(m));
  consider(articulation_candidates(m));

  const int cands = n - 1;  // ops 1..n-1
  if (cands <= kExhaustiveOps) {
    const uint64_t total = uint64_t{1} << cands;
    std::vector<int> ckpt;
    uint64_t mask = 0;
    for (; mask < total; ++mask) {
      if ((mask & 1023) == 0 && Clock::now() > deadline) break;
      ckpt.clear();
      for (int i = 0; i < cands; ++i)
        if (mask >> i & 1) ckpt.push_back(i + 1);
      consider(ckpt);
    }
    r.proven = mask == total;
    return r;
  }
  // Larger graphs: iterated local search from the best seed. Single add/remove
  // moves to a local optimum, then kicks (2-3 random flips of the best set)
  // followed by local search again, until the time limit or 200 kicks in a
  // row bring nothing. Deterministic (fixed seed).
  std::vector<char> best(static_cast<std::size_t>(n), 0);
  for (int c : r.checkpoints) best[static_cast<std::size_t>(c)] = 1;
  auto as_set = [&](const std::vector<char>& in) {
    std::vector<int> ckpt;
    for (int u = 1; u < n; ++u)
      if (in[static_cast<std::size_t>(u)]) ckpt.push_back(u);
    return ckpt;
  };
  // Local search on `in`, scoring with `score` (flops, or peak when nothing fits yet).
  auto descend = [&](std::vector<char>& in) {
    Eval cur = evaluate(m, as_set(in));
    ++r.evaluated;
    auto better = [&](const Eval& a, const Eval& b) {
      const bool fa = a.peak <= budget, fb = b.peak <= budget;
      if (fa != fb) return fa;
      return fa ? a.flops < b.flops : a.peak < b.peak;
    };
    bool improved = true;
    while (improved && Clock::now() < deadline) {
      improved = false;
      for (int v = 1; v < n && Clock::now() < deadline; ++v) {
        in[static_cast<std::size_t>(v)] ^= 1;
        const auto ckpt = as_set(in);
        const Eval e = evaluate(m, ckpt);
        ++r.evaluated;
        r.least_peak = std::min(r.least_peak, e.peak);
        if (better(e, cur)) {
          cur = e;
          improved = true;
          consider(ckpt);
        } else {
          in[static_cast<std::size_t>(v)] ^= 1;
        }
      }
    }
  };
  std::vector<char> in = best;
  descend(in);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> pick(1, n - 1);
  for (int quiet = 0; quiet < 200 && Clock::now() < deadline; ++quiet) {
    const double before = r.found ? r.recompute_flops : std::numeric_limits<double>::infinity();
    in.assign(static_cast<std::size_t>(n), 0);
    for (int c : r.checkpoints) in[static_cast<std::size_t>(c)] = 1;
    for (int k = 0; k < 2 + quiet % 2; ++k) in[static_cast<std::size_t>(pick(rng))] ^= 1;
    descend(in);
    if (r.found && r.recompute_flops < before) quiet = -1;
  }
  return r;
}

std::unique_ptr<Strategy> make_optimal(uint64_t budget, double time_limit_s) {
  return std::make_unique<Optimal>(budget, time_limit_s);
}

}  // namespace remat
