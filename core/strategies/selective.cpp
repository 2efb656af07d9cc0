// Selective recomputation (Megatron-LM): keep what is expensive to recompute,
// recompute the cheap elementwise ops and norms.
#include "core/checkpoint_schedule.h"
#include "core/model.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

bool cheap(OpKind k) {
  switch (k) {
    case OpKind::ReLU: case OpKind::GELU: case OpKind::Tanh: case OpKind::LayerNorm:
    case OpKind::Add: case OpKind::Dropout:
      return true;
    default:  // Linear, Dense, losses, and Generic ops whose cost we do not trust
      return false;
  }
}

class Selective final : public Strategy {
 public:
  std::string name() const override { return "selective"; }
  Schedule schedule(const Model& m) const override { return segment_schedule(m, selective_checkpoints(m), name()); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, selective_checkpoints(m), limit);
  }
};

}  // namespace

// Expensive outputs, plus cheap ops read by several ops (a residual stream):
// without them one segment's recompute would run back along every residual Add
// to the input.
std::vector<int> selective_checkpoints(const Model& m) {
  std::vector<int> keep;
  for (int v = 1; v < m.loss(); ++v) {
    if (!cheap(m.op(v).kind) || m.consumers(v).size() > 1) keep.push_back(v);
  }
  return keep;
}

std::unique_ptr<Strategy> make_selective() { return std::make_unique<Selective>(); }

}  // namespace remat
