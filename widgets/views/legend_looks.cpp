#include "widgets/views/legend_looks.h"

#include <vector>

#include "core/model/model.h"
#include "core/sim/resident_index.h"
#include "core/sim/schedule.h"
#include "widgets/document/node_states.h"
#include "widgets/document/op_labels.h"

namespace remat {

namespace {
LegendMask modelBits(const Model& m) {
  LegendMask mask = 0;
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).view) mask |= kViewLegendBit;
    if (marks_simulate_only(m, v)) mask |= kSimulateOnlyLegendBit;
  }
  return mask;
}
}  // namespace

LegendMask legend_mask(const Model& m, const Schedule& s, const ScheduleFacts& facts) {
  const int n = m.size();
  LegendMask mask = modelBits(m);
  if (s.code.empty() || n < 2) return mask;
  // Before its first forward every later op waits; the running one computes.
  mask |= legend_bit(NodeLook::ActNotComputed) | legend_bit(NodeLook::GradNotYet);
  auto inner = [&](int v) { return v > 0 && v < n - 1; };  // ops with a square
  // The input is given before the first instruction (no fwd of its own).
  if (!(s.code[0] == Instr{InstrKind::FreeAct, 0}))
    mask |= legend_bit(facts.is_checkpoint(0) ? NodeLook::ActCheckpoint : NodeLook::ActResident);
  for (std::size_t t = 0; t < s.code.size(); ++t) {
    const Instr ins = s.code[t];
    const int v = ins.op;
    switch (ins.kind) {
      case InstrKind::Fwd: {
        mask |= legend_bit(facts.first_fwd(v) == t ? NodeLook::ActComputing : NodeLook::ActRecomputing);
        // Live after its forward, unless the next instruction frees it.
        if (t + 1 < s.code.size() && !(s.code[t + 1] == Instr{InstrKind::FreeAct, v}))
          mask |= legend_bit(facts.is_checkpoint(v) ? NodeLook::ActCheckpoint : NodeLook::ActResident);
        break;
      }
      case InstrKind::FreeAct:
        // Freed, unless only its compressed copy stays (drawn compressed) or
        // it is an eviction of a strategy deciding at run time, recomputed later.
        if (facts.evicted_at(v, t)) mask |= legend_bit(NodeLook::ActEvicted);
        else if (facts.packing(v) == Packing::None) mask |= legend_bit(NodeLook::ActFreed);
        break;
      case InstrKind::FreePacked: mask |= legend_bit(NodeLook::ActFreed); break;
      case InstrKind::Offload: mask |= legend_bit(NodeLook::ActOnHost); break;
      case InstrKind::Fetch: mask |= legend_bit(NodeLook::ActFetching); break;
      case InstrKind::CompressBF16:
      case InstrKind::CompressF16:
      case InstrKind::CompressInt8: mask |= legend_bit(NodeLook::ActCompressed); break;
      case InstrKind::Bwd:
        if (inner(v)) mask |= legend_bit(NodeLook::BwdRunning);
        for (int u : m.op(v).inputs)
          if (inner(u) && m.has_grad_tensor(u)) mask |= legend_bit(NodeLook::GradResident);
        if (inner(v) && !m.has_grad_tensor(v)) mask |= legend_bit(NodeLook::GradFreed);
        break;
      case InstrKind::FreeGrad:
        if (inner(v)) mask |= legend_bit(NodeLook::GradFreed);
        break;
      default: break;
    }
  }
  return mask;
}

LegendMask legend_mask_by_steps(const Model& m, const Schedule& s, const ResidentIndex& index,
                                const ScheduleFacts& facts) {
  LegendMask mask = modelBits(m);
  const int n = m.size();
  for (std::size_t t = 0; t < s.code.size(); ++t) {
    const NodeStates st = node_states_at(m, s, index, facts, t);
    for (int v = 0; v < n; ++v) {
      mask |= legend_bit(activation_look(st, v));
      if (v > 0 && v < n - 1) mask |= legend_bit(gradient_look(st, v));
    }
  }
  return mask;
}

}  // namespace remat
