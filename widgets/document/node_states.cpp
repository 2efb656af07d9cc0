#include "widgets/document/node_states.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/instr_reads.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"

namespace remat {

ScheduleFacts::ScheduleFacts(const Model& model, const StrategyRun& run)
    : ScheduleFacts(model, run.schedule, run.declared, run.parsed) {}

ScheduleFacts::ScheduleFacts(const Model& model, const Schedule& schedule, const std::vector<int>& declared,
                             std::optional<StrategySpec> spec)
    : spec_(std::move(spec)) {
  const auto n = static_cast<std::size_t>(model.size());
  first_fwd_.assign(n, kNever);
  bwd_.assign(n, kNever);
  checkpoint_.assign(n, 0);
  packing_.assign(n, 0);
  first_fwd_[0] = 0;  // the input is given before the first instruction
  std::vector<uint8_t> freed(n, 0);
  live_ = spec_ && strategy_info(*spec_).decides_live;
  if (live_) {
    fwd_at_.resize(n);
    free_at_.resize(n);
    free_evicts_.resize(n);
    const std::vector<std::size_t>& ev = schedule.evictions;  // ascending
    auto next = ev.begin();
    for (std::size_t i = 0; i < schedule.code.size(); ++i) {
      const auto v = static_cast<std::size_t>(schedule.code[i].op);
      while (next != ev.end() && *next < i) ++next;
      if (schedule.code[i].kind == InstrKind::Fwd) fwd_at_[v].push_back(i);
      if (schedule.code[i].kind == InstrKind::FreeAct) {
        free_at_[v].push_back(i);
        free_evicts_[v].push_back(next != ev.end() && *next == i);
      }
    }
  }
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    const Instr ins = schedule.code[i];
    const auto v = static_cast<std::size_t>(ins.op);
    switch (ins.kind) {
      case InstrKind::Fwd:
        if (first_fwd_[v] == kNever) {
          first_fwd_[v] = i;
        } else {
          for (int u : model.op(ins.op).inputs)
            if (!freed[static_cast<std::size_t>(u)]) checkpoint_[static_cast<std::size_t>(u)] = 1;
        }
        break;
      case InstrKind::Bwd: bwd_[v] = i; break;
      case InstrKind::FreeAct: freed[v] = 1; break;
      // A checkpoint on the host is still one: it comes back, not recomputed.
      case InstrKind::Offload: host_.push_back({ins.op, i, kNever}); break;
      case InstrKind::Fetch:
        for (auto it = host_.rbegin(); it != host_.rend(); ++it)
          if (it->op == ins.op && it->fetch == kNever) {
            it->fetch = i;
            break;
          }
        break;
      // A compressed checkpoint is still one: it is decompressed, not recomputed.
      case InstrKind::CompressBF16:
      case InstrKind::CompressF16:
      case InstrKind::CompressInt8: packing_[v] = static_cast<uint8_t>(packing_of(ins.kind)); break;
      case InstrKind::FreeGrad:
      case InstrKind::FreeAux:
      case InstrKind::Decompress:
      case InstrKind::FreePacked: break;
    }
  }
  for (int v : declared)
    if (v >= 0 && static_cast<std::size_t>(v) < n) checkpoint_[static_cast<std::size_t>(v)] = 1;
}

bool ScheduleFacts::evicted_at(int op, std::size_t t) const {
  if (!live_) return false;
  const auto v = static_cast<std::size_t>(op);
  // The free that took A(op) away: the last at or before t.
  const auto& frees = free_at_[v];
  const auto after = std::upper_bound(frees.begin(), frees.end(), t);
  if (after == frees.begin() || !free_evicts_[v][static_cast<std::size_t>(after - frees.begin()) - 1]) return false;
  const auto& at = fwd_at_[v];
  return std::upper_bound(at.begin(), at.end(), t) != at.end();
}

std::vector<int> ScheduleFacts::checkpoint_list() const {
  std::vector<int> out;
  for (std::size_t v = 0; v < checkpoint_.size(); ++v)
    if (checkpoint_[v]) out.push_back(static_cast<int>(v));
  return out;
}

NodeStates node_states_at(const Model& model, const Schedule& schedule, const ResidentIndex& index,
                          const ScheduleFacts& facts, std::size_t t) {
  const auto n = static_cast<std::size_t>(model.size());
  NodeStates s;
  s.fwd.assign(n, FwdState::NotComputed);
  s.bwd.assign(n, BwdState::Pending);
  s.checkpoint = facts.checkpoints();
  s.grad_live.assign(n, 0);
  s.packing.assign(n, Packing::None);
  if (schedule.code.empty()) return s;
  if (t >= schedule.code.size()) t = schedule.code.size() - 1;
  std::vector<uint8_t> act(n, 0), packed(n, 0);
  for (const TensorRef& r : index.resident_at(t)) {
    if (r.aux) continue;  // aux(v) is not a node of the graph
    if (r.grad) s.grad_live[static_cast<std::size_t>(r.op)] = 1;
    else if (r.packed) packed[static_cast<std::size_t>(r.op)] = 1;
    else act[static_cast<std::size_t>(r.op)] = 1;
  }
  for (std::size_t v = 0; v < n; ++v) {
    const std::size_t first = facts.first_fwd(static_cast<int>(v));
    if (act[v]) {
      s.fwd[v] = FwdState::Live;
    } else if (packed[v]) {  // kept at a smaller size: not freed
      s.fwd[v] = FwdState::Compressed;
      s.packing[v] = facts.packing(static_cast<int>(v));
    } else if (first != ScheduleFacts::kNever && first <= t) {
      s.fwd[v] = facts.evicted_at(static_cast<int>(v), t) ? FwdState::Evicted : FwdState::Freed;
    }
    const std::size_t b = facts.bwd_at(static_cast<int>(v));
    if (b != ScheduleFacts::kNever && b < t) s.bwd[v] = BwdState::Done;
  }
  // Offloaded, not freed: it waits on the host and comes back.
  for (const ScheduleFacts::HostSpan& h : facts.host_spans())
    if (h.offload <= t && t < h.fetch) s.fwd[static_cast<std::size_t>(h.op)] = FwdState::OnHost;
  const Instr ins = schedule.code[t];
  const auto v = static_cast<std::size_t>(ins.op);
  s.has_running = true;
  s.running = ins;
  // aux(v) is no node of the graph: no arrow goes to it.
  for (const TensorRef& r : tensors_read(model, ins))
    if (!r.aux) s.reads.push_back(r);
  if (ins.kind == InstrKind::Fwd) s.fwd[v] = facts.first_fwd(ins.op) == t ? FwdState::Computing : FwdState::Recomputing;
  if (ins.kind == InstrKind::Bwd) s.bwd[v] = BwdState::Running;
  if (ins.kind == InstrKind::Fetch) s.fwd[v] = FwdState::Fetching;
  return s;
}

}  // namespace remat
