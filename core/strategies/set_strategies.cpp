// The strategies that are one checkpoint set fed to the generator
// (checkpoint_sets.h): store-all, recompute-all, sqrt, every-k, manual, auto
// and selective.
#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/factories.h"

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
  Schedule schedule(const Model& m) const override { return cut_schedule(m, boundaries(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override { return cut_schedule_size(m, boundaries(m), limit); }
  std::vector<int> declared_checkpoints(const Model& m) const override { return cut_checkpoints(m, boundaries(m)); }

 private:
  std::vector<int> boundaries(const Model& m) const { return every_k_boundaries(m, k_ ? k_ : sqrt_interval(m)); }
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
  std::vector<int> declared_checkpoints(const Model&) const override { return ops_; }

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

class Auto final : public Strategy {
 public:
  std::string name() const override { return "auto"; }
  Schedule schedule(const Model& m) const override { return segment_schedule(m, auto_checkpoints(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, auto_checkpoints(m), limit);
  }
};

class Selective final : public Strategy {
 public:
  std::string name() const override { return "selective"; }
  Schedule schedule(const Model& m) const override { return segment_schedule(m, selective_checkpoints(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, selective_checkpoints(m), limit);
  }
};

}  // namespace

std::unique_ptr<Strategy> make_store_all() { return std::make_unique<StoreAll>(); }
std::unique_ptr<Strategy> make_recompute_all() { return std::make_unique<RecomputeAll>(); }
std::unique_ptr<Strategy> make_every_k(int k) { return std::make_unique<EveryK>(k); }
std::unique_ptr<Strategy> make_manual(std::vector<int> sorted_ops) { return std::make_unique<Manual>(std::move(sorted_ops)); }
std::unique_ptr<Strategy> make_auto() { return std::make_unique<Auto>(); }
std::unique_ptr<Strategy> make_selective() { return std::make_unique<Selective>(); }

}  // namespace remat
