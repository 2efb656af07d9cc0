#include "core/strategies/rewriting.h"

#include "core/model/model.h"

namespace remat {
namespace {

class Rewriting final : public Strategy {
 public:
  Rewriting(std::unique_ptr<Strategy> inner, std::string spec, uint64_t added_per_op, ScheduleRewrite rewrite)
      : inner_(std::move(inner)), spec_(std::move(spec)), added_per_op_(added_per_op), rewrite_(std::move(rewrite)) {}
  std::string name() const override { return spec_; }
  Schedule schedule(const Model& m) const override {
    std::vector<SolverRecord> ignored;
    return schedule_with_record(m, ignored);
  }
  // The rewrite changes no recompute: the inner search's records stand.
  Schedule schedule_with_record(const Model& m, std::vector<SolverRecord>& records) const override {
    Schedule s = rewrite_(m, inner_->schedule_with_record(m, records));
    s.strategy = spec_;
    return s;
  }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    ScheduleSize s = inner_->size(m, limit);
    if (s.bound == ScheduleSize::Bound::AtLeast) return s;
    s.instructions += added_per_op_ * static_cast<uint64_t>(m.size());
    s.bound = ScheduleSize::Bound::AtMost;
    return s;
  }

 private:
  std::unique_ptr<Strategy> inner_;
  std::string spec_;
  uint64_t added_per_op_;
  ScheduleRewrite rewrite_;
};

}  // namespace

std::unique_ptr<Strategy> make_rewriting(std::unique_ptr<Strategy> inner, std::string spec, uint64_t added_per_op,
                                         ScheduleRewrite rewrite) {
  return std::make_unique<Rewriting>(std::move(inner), std::move(spec), added_per_op, std::move(rewrite));
}

}  // namespace remat
