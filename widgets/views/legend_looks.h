// Which of the graph's looks a run can show, so that the legend lists only
// the states that occur in the model and the compared strategies (a legend of
// fifteen entries on chain:16, where offloaded, compressed and views never
// occur, hides the lesson).
#pragma once
#include <cstdint>

#include "widgets/views/node_style.h"

namespace remat {
struct Model;
struct Schedule;
class ResidentIndex;
class ScheduleFacts;

// Bit i for NodeLook i, then the view ring and the simulate-only badge.
using LegendMask = uint32_t;
constexpr LegendMask kViewLegendBit = 1u << static_cast<int>(NodeLook::Count);
constexpr LegendMask kSimulateOnlyLegendBit = kViewLegendBit << 1;
constexpr LegendMask kFullLegend = (kSimulateOnlyLegendBit << 1) - 1;
constexpr LegendMask legend_bit(NodeLook look) { return 1u << static_cast<int>(look); }

// The looks run `schedule` shows at some step, read from its instructions
// and facts in one pass (node_states_at's rules, without making the states of
// every step); the view bit where the model has views, the simulate-only bit
// where it has ops that mark_simulate_only (op_labels.h) badges.
LegendMask legend_mask(const Model& model, const Schedule& schedule, const ScheduleFacts& facts);
// The same by painting every step's states: exact by construction, for
// checks (steps × ops work).
LegendMask legend_mask_by_steps(const Model& model, const Schedule& schedule, const ResidentIndex& index,
                                const ScheduleFacts& facts);

}  // namespace remat
