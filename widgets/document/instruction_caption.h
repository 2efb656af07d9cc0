// The caption under the graph: the instruction at step t in words, with the
// reason read from the rest of the schedule ("recomputing a3 from checkpoint
// a2 because the backward of a4 needs it", "freeing a5: nothing later reads it").
#pragma once
#include <cstddef>
#include <string>
#include "core/sim/schedule.h"

namespace remat {
struct Model;
class ScheduleFacts;

class InstructionCaption {
 public:
  InstructionCaption(const Model& model, const Schedule& schedule, const ScheduleFacts& facts)
      : model_(&model), schedule_(&schedule), facts_(&facts) {}
  std::string text(std::size_t t) const;

 private:
  std::string name(int op) const;
  std::string names(const std::vector<int>& ops) const;
  bool reads_act(const Instr& ins, int op) const;
  // Why dtr's heuristic chose what it evicts, from the schedule's spec.
  std::string eviction_reason() const;
  const Model* model_;
  const Schedule* schedule_;
  const ScheduleFacts* facts_;
};

}  // namespace remat
