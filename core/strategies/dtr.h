// Dynamic tensor rematerialization (Kirisame et al., ICLR 2021) played by the
// simulator: the training step's program runs in order (the forward pass, then
// the backward pass), memory is a cache of tensors under a byte budget, and
// when an allocation would not fit the policy evicts the resident tensor its
// heuristic scores lowest; a read of an evicted tensor recomputes it on demand,
// recursively. The result is an ordinary schedule: evictions are frees,
// on-demand recomputations are fwd instructions.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sim/schedule.h"
#include "core/strategies/strategy.h"

namespace remat {

struct Model;

// Which resident tensor goes when memory is full (lowest score first):
enum class DtrHeuristic : uint8_t {
  HDtr,     // h = c / (m · s): recompute FLOPs over bytes times staleness (the paper's h_DTR)
  HDtrEq,   // as HDtr with c the FLOPs of the evicted neighbourhood it would drag back (h_DTR^eq, union-find)
  Lru,      // the stalest
  Largest,  // the most bytes
};

// "h-dtr", "h-dtr-eq", "lru", "largest", in DtrHeuristic's order.
const std::vector<std::string>& dtr_heuristic_names();

// One eviction, for captions: the storage owner evicted (or the op whose aux
// went), at which instruction of the schedule (the first of its frees), and
// its score's parts.
struct DtrEviction {
  std::size_t instruction = 0;
  int storage = 0;
  bool aux = false;        // aux(storage) alone, not A
  double cost = 0;         // recompute FLOPs the heuristic charged
  uint64_t bytes = 0;      // bytes freed
  uint64_t staleness = 0;  // instructions since it was last read or made
};

struct DtrPlay {
  Schedule schedule;
  std::vector<DtrEviction> evictions;
  uint64_t peak = 0;         // the policy's own count; simulate() agrees to the byte
  bool stopped = false;      // the program grew past `max_instructions`
  // Program instructions the heuristic could not make room for, prepared
  // instead as recompute-all prepares them (dtr.cpp: program_fwd).
  std::size_t fallbacks = 0;
};

// Plays the policy on `model` under `budget` bytes. Throws InputError naming
// the instruction when what it reads and makes cannot fit however much is
// evicted. Stops (DtrPlay::stopped) once the schedule passes max_instructions.
DtrPlay play_dtr(const Model& model, uint64_t budget, DtrHeuristic heuristic,
                 uint64_t max_instructions = UINT64_MAX);

// The same policy deciding inside a run: each instruction goes to live.run
// as it is decided, and the bytes held come from live.live_bytes() (the
// executor's allocator). With the allocator counting as the simulator does,
// it decides exactly what play_dtr decides.
DtrPlay play_dtr_live(const Model& model, uint64_t budget, DtrHeuristic heuristic, const LiveRun& live);

}  // namespace remat
