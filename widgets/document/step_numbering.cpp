#include "widgets/document/step_numbering.h"

#include <algorithm>

namespace remat {
namespace {
bool isFree(const Instr& i) { return i.kind == InstrKind::FreeAct || i.kind == InstrKind::FreeGrad; }
}  // namespace

StepNumbering::StepNumbering(const Schedule& schedule, bool hideFrees)
    : schedule_(&schedule), hide_(hideFrees) {
  const auto& code = schedule.code;
  if (!hide_) {
    count_ = code.size();
    return;
  }
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (i % kBlock == 0) blockStart_.push_back(count_);
    if (!isFree(code[i])) ++count_;
  }
}

bool StepNumbering::shown(std::size_t i) const {
  return !hide_ || (schedule_ && i < schedule_->code.size() && !isFree(schedule_->code[i]));
}

std::size_t StepNumbering::rank(std::size_t instruction) const {
  if (!hide_) return instruction;
  const auto& code = schedule_->code;
  instruction = std::min(instruction, code.size());
  if (instruction == 0) return 0;
  const std::size_t b = (instruction - 1) / kBlock;
  std::size_t r = blockStart_[b];
  for (std::size_t i = b * kBlock; i < instruction; ++i) r += !isFree(code[i]);
  return r;
}

std::size_t StepNumbering::instruction(std::size_t number) const {
  if (!hide_) return count_ ? std::min(number, count_ - 1) : 0;
  if (count_ == 0) return 0;
  number = std::min(number, count_ - 1);
  // The last block starting with at most `number` shown steps before it.
  const auto it = std::upper_bound(blockStart_.begin(), blockStart_.end(), number);
  const std::size_t b = static_cast<std::size_t>(it - blockStart_.begin()) - 1;
  std::size_t r = blockStart_[b];
  const auto& code = schedule_->code;
  for (std::size_t i = b * kBlock; i < code.size(); ++i) {
    if (isFree(code[i])) continue;
    if (r == number) return i;
    ++r;
  }
  return code.size() - 1;  // unreachable: count_ shown steps exist
}

std::size_t StepNumbering::snap(std::size_t instruction) const {
  if (!hide_ || count_ == 0) return instruction;
  const auto& code = schedule_->code;
  for (std::size_t i = instruction; i < code.size(); ++i)
    if (!isFree(code[i])) return i;
  return this->instruction(count_ - 1);
}

}  // namespace remat
