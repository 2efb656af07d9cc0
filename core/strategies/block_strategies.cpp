// The two checkpoint sets practitioners write by hand for real networks, read
// from the graph's structure (repeated_blocks.h): attention-core (Megatron-LM's
// selective recomputation) and blocks (torch.utils.checkpoint around every
// block).
#include "core/model/model.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/factories.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {
namespace {

// `pick` with the strategy's count (0: its default).
class FromStructure final : public Strategy {
 public:
  using Pick = std::vector<int> (*)(const Model&, int);
  using Absent = std::string (*)(const Model&);
  FromStructure(std::string head, int count, Pick pick, Absent absent)
      : head_(std::move(head)), count_(count), pick_(pick), absent_(absent) {}
  std::string name() const override { return count_ ? head_ + ":" + std::to_string(count_) : head_; }
  // Where the model lacks the structure, everything is kept, and the note says why.
  Schedule schedule(const Model& m) const override {
    Schedule s = segment_schedule(m, pick_(m, count_), name());
    s.note = absent_(m);
    return s;
  }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    return segment_schedule_size(m, pick_(m, count_), limit);
  }

 private:
  std::string head_;
  int count_;
  Pick pick_;
  Absent absent_;
};

}  // namespace

std::unique_ptr<Strategy> make_attention_core(int count) {
  return std::make_unique<FromStructure>("attention-core", count, attention_core_checkpoints, attention_core_absent);
}
std::unique_ptr<Strategy> make_blocks(int every) {
  return std::make_unique<FromStructure>("blocks", every, block_input_checkpoints, blocks_absent);
}

}  // namespace remat
