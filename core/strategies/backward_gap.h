// What a schedule does with each tensor around the start of its backward pass
// (the first bwd): the facts the modifiers that act on the checkpoints kept
// through it need (offload.h moves them to the host, compress.h stores them
// smaller), found in one pass, and the splice that adds their instructions.
#pragma once
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/sim/schedule.h"
#include "core/sim/simulator.h"

namespace remat {

struct Model;

struct BackwardGap {
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  explicit BackwardGap(const Model& model) : at_backward(model) {}

  std::size_t first_bwd = kNone;        // index of the first bwd
  std::size_t first_recompute = kNone;  // the first fwd after it
  ResidentSet at_backward;              // resident (or on the host) when the first bwd runs
  // Per op: its last read or compute before the first bwd; from there on, its
  // first read (and whether a recompute, a fwd, made it), its first free and
  // its first recompute (kNone: never).
  std::vector<std::size_t> forward_last, backward_read, backward_free, backward_fwd;
  std::vector<uint8_t> read_by_fwd;
  std::vector<uint8_t> aliased;  // per storage owner: some view aliases it
};

// One pass over `code` (a valid schedule).
BackwardGap backward_gap(const Model& model, const std::vector<Instr>& code);

// `inner` with each (index, instruction) inserted before the instruction at
// that index (the end: after the last), in the order given for one index.
// `inserts` must be sorted by index.
Schedule with_inserts(Schedule inner, const std::vector<std::pair<std::size_t, Instr>>& inserts);

}  // namespace remat
