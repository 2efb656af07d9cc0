// How steps are counted for the user: every instruction, or (with `free`
// instructions hidden) only the fwd and bwd ones; a free then happens between
// two shown steps. Maps a shown step number to its instruction and back with
// a prefix count every kBlock instructions, so a 20M-instruction schedule
// costs 20M / kBlock counters instead of an index per instruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/sim/schedule.h"

namespace remat {

class StepNumbering {
 public:
  static constexpr std::size_t kBlock = 1024;
  StepNumbering() = default;
  StepNumbering(const Schedule& schedule, bool hideFrees);
  bool hidesFrees() const { return hide_; }
  bool shown(std::size_t instruction) const;
  std::size_t count() const { return count_; }  // shown steps
  // Shown steps before `instruction` (its number, 0-based, when it is shown).
  std::size_t rank(std::size_t instruction) const;
  // The instruction of shown step `number` (clamped to the last).
  std::size_t instruction(std::size_t number) const;
  // The shown instruction at or after `instruction` (else the last shown one).
  std::size_t snap(std::size_t instruction) const;

 private:
  const Schedule* schedule_ = nullptr;
  bool hide_ = false;
  std::size_t count_ = 0;
  std::vector<std::size_t> blockStart_;  // shown steps before block b
};

}  // namespace remat
