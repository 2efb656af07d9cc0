// "Why is the peak where it is": the instruction at a strategy's peak and the
// tensors resident there, grouped by why they are held.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/sim/schedule.h"

namespace remat {

struct Model;

enum class HeldFor : uint8_t {
  Checkpoint,      // kept from the forward pass and read again by a recompute (the input too)
  AwaitsBackward,  // kept from the forward pass only for backward steps still to come
  Recomputed,      // a recomputed copy, held for this backward phase
  Gradient,        // G(v): an activation gradient
  Private,         // aux(v): statistics, indices, masks, copies an op's backward reads
};
std::string_view held_for_name(HeldFor h);

struct PeakGroup {
  HeldFor reason;
  uint64_t bytes = 0;
  std::vector<int> ops;  // in op order (a view's storage counts with its first resident alias)
};

struct PeakExplanation {
  std::string strategy;
  std::size_t peak_index = 0;
  Instr instr{InstrKind::Fwd, 0};
  uint64_t peak_bytes = 0;
  std::vector<PeakGroup> groups;  // one per reason, in HeldFor order, empty ones left out
  // Offloaded to the host while the peak instruction runs: outside the device
  // peak, and the reason it is lower than the strategy offloaded from.
  uint64_t host_bytes = 0;
  std::vector<int> host_ops;
  const PeakGroup* group(HeldFor h) const;
};

// Simulates (and so validates) the schedule, then classifies what is resident
// while the peak instruction runs. Group bytes sum to peak_bytes.
PeakExplanation explain_peak(const Model& model, const Schedule& schedule);

std::string explanation_text(const Model& model, const PeakExplanation& e);
nlohmann::json explanation_json(const Model& model, const PeakExplanation& e);

}  // namespace remat
