#include "core/strategy.h"

#include <algorithm>
#include <cmath>

#include "core/checkpoint_schedule.h"
#include "core/errors.h"
#include "core/model.h"
#include "core/spec_parse.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

class StoreAll final : public Strategy {
 public:
  std::string name() const override { return "store-all"; }
  // One backward phase: everything the forward pass made stays until used.
  Schedule schedule(const Model& m) const override { return segment_schedule(m, {}, name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override { return segment_schedule_size(m, {}, limit); }
};

class RecomputeAll final : public Strategy {
 public:
  std::string name() const override { return "recompute-all"; }
  // Only the input is kept; every backward step recomputes what it reads from it.
  Schedule schedule(const Model& m) const override { return checkpoint_schedule(m, {1}, phases(m), name()); }
  // n(n+1)/2 forward steps on a chain of n ops after the input.
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return checkpoint_schedule_size(m, {1}, phases(m), limit);
  }

 private:
  static std::vector<int> phases(const Model& m) {  // one per op
    std::vector<int> starts;
    for (int v = 1; v < m.size(); ++v) starts.push_back(v);
    return starts;
  }
};

class EveryK final : public Strategy {
 public:
  explicit EveryK(int k) : k_(k) {}
  std::string name() const override { return k_ ? "every-k:" + std::to_string(k_) : "sqrt"; }
  Schedule schedule(const Model& m) const override { return segment_schedule(m, checkpoints(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, checkpoints(m), limit);
  }

 private:
  std::vector<int> checkpoints(const Model& m) const { return every_k_checkpoints(m, k_ ? k_ : sqrt_interval(m)); }
  int k_;  // 0: ⌈√n⌉ for the model at hand
};

class Manual final : public Strategy {
 public:
  explicit Manual(std::vector<int> ops) : ops_(std::move(ops)) {}
  std::string name() const override {
    std::string s = "manual:";
    for (std::size_t i = 0; i < ops_.size(); ++i) s += (i ? "," : "") + std::to_string(ops_[i]);
    return s;
  }
  Schedule schedule(const Model& m) const override {
    check(m);
    return segment_schedule(m, ops_, name());
  }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    check(m);
    return segment_schedule_size(m, ops_, limit);
  }

 private:
  void check(const Model& m) const {
    for (int v : ops_) {
      if (v < 0 || v >= m.loss())
        throw InputError("manual: checkpoint " + std::to_string(v) + " is out of range 0.." +
                         std::to_string(m.loss() - 1) + " for model '" + m.name + "'");
    }
  }
  std::vector<int> ops_;
};

std::string args_of(std::string_view spec, std::string_view name) {
  if (spec.size() <= name.size() || spec[name.size()] != ':')
    throw InputError("strategy '" + std::string(spec) + "' needs an argument: " + std::string(name) + ":...");
  return std::string(spec.substr(name.size() + 1));
}

}  // namespace

const std::vector<StrategyInfo>& strategy_catalog() {
  static const std::vector<StrategyInfo> catalog = {
      {"store-all", "", "keep every activation until its backward (as soon as possible)"},
      {"recompute-all", "", "keep only the input; recompute before every backward step (as late as possible)"},
      {"sqrt", "", "checkpoint every ceil(sqrt(n)) ops"},
      {"every-k", "K", "checkpoint every K ops (K >= 1)"},
      {"manual", "I,J,...", "checkpoint the listed op ids (topological indices)"},
      {"revolve", "C", "binomial checkpointing for chains with C slots, the input's included (minimal recomputation)"},
      {"budget", "BYTES", "chains: least recompute FLOPs whose peak fits BYTES (dynamic programming over segments)"},
      {"auto", "", "checkpoint articulation points of the DAG, spaced about sqrt(n)"},
      {"optimal", "BYTES[:SECONDS]", "least recompute FLOPs under BYTES over checkpoint sets (branch and bound; best found when the time limit, default 5 s, runs out)"},
      {"selective", "", "keep Linear/Dense/loss outputs and branch points, recompute the cheap ops"},
  };
  return catalog;
}

std::unique_ptr<Strategy> make_strategy(std::string_view spec) {
  const std::string s(spec);
  const std::string head = s.substr(0, s.find(':'));
  const bool has_arg = s.find(':') != std::string::npos;
  auto no_arg = [&](std::unique_ptr<Strategy> st) {
    if (has_arg) throw InputError("strategy '" + head + "' takes no argument (got '" + s + "')");
    return st;
  };
  if (head == "store-all") return no_arg(std::make_unique<StoreAll>());
  if (head == "recompute-all") return no_arg(std::make_unique<RecomputeAll>());
  if (head == "sqrt") return no_arg(std::make_unique<EveryK>(0));
  if (head == "every-k") {
    return std::make_unique<EveryK>(static_cast<int>(parse_int(args_of(s, head), "every-k: K", 1, 1 << 30)));
  }
  if (head == "manual") {
    std::vector<int> ops;
    const std::string a = args_of(s, head);
    for (const auto& f : split(a, ',')) ops.push_back(static_cast<int>(parse_int(f, "manual: checkpoint index", 0, 1 << 30)));
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    return std::make_unique<Manual>(std::move(ops));
  }
  if (head == "revolve")
    return make_revolve(static_cast<int>(parse_int(args_of(s, head), "revolve: C (checkpoint slots)", 1, 1 << 20)));
  if (head == "budget") return make_budget(parse_bytes(args_of(s, head), "budget: BYTES"));
  if (head == "auto") return no_arg(make_auto());
  if (head == "selective") return no_arg(make_selective());
  if (head == "optimal") {
    const auto f = split(args_of(s, head), ':');
    if (f.size() > 2) throw InputError("optimal: expected optimal:BYTES[:SECONDS] (got '" + s + "')");
    // Someone is waiting for the answer: a few seconds unless they ask for more.
    const double limit = f.size() == 2 ? static_cast<double>(parse_int(f[1], "optimal: SECONDS", 1, 86400)) : 5.0;
    return make_optimal(parse_bytes(f[0], "optimal: BYTES"), limit);
  }
  std::string known;
  for (const auto& info : strategy_catalog()) known += (known.empty() ? "" : ", ") + info.name;
  throw InputError("unknown strategy '" + s + "' (known: " + known + ")");
}

std::vector<std::string> split_strategy_list(std::string_view list) {
  std::vector<std::string> out;
  for (auto& part : split(list, ',')) {
    const bool number = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (number && !out.empty() && out.back().find(':') != std::string::npos) out.back() += "," + part;
    else out.push_back(part);
  }
  return out;
}

std::vector<int> every_k_checkpoints(const Model& model, int k) {
  std::vector<int> c;
  for (int v = k; v < model.loss(); v += k) c.push_back(v);
  return c;
}

int sqrt_interval(const Model& model) {
  const int n = model.loss();  // ops after the input
  return std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
}

}  // namespace remat
