#include "core/strategies/backward_gap.h"

#include "core/sim/instr_reads.h"
#include "core/model/model.h"

namespace remat {

BackwardGap backward_gap(const Model& model, const std::vector<Instr>& code) {
  const auto n = static_cast<std::size_t>(model.size());
  BackwardGap g(model);
  g.forward_last.assign(n, BackwardGap::kNone);
  g.backward_read.assign(n, BackwardGap::kNone);
  g.backward_free.assign(n, BackwardGap::kNone);
  g.backward_fwd.assign(n, BackwardGap::kNone);
  g.read_by_fwd.assign(n, 0);
  g.aliased.assign(n, 0);
  for (int v = 0; v < model.size(); ++v)
    if (model.storage(v) != v) g.aliased[static_cast<std::size_t>(model.storage(v))] = 1;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instr ins = code[i];
    const auto v = static_cast<std::size_t>(ins.op);
    if (g.first_bwd == BackwardGap::kNone && ins.kind == InstrKind::Bwd) g.first_bwd = i;
    const bool before = g.first_bwd == BackwardGap::kNone;
    if (before) {
      g.at_backward.apply(model, ins);
      if (ins.kind == InstrKind::Fwd) g.forward_last[v] = i;
    } else if (ins.kind == InstrKind::FreeAct && g.backward_free[v] == BackwardGap::kNone) {
      g.backward_free[v] = i;
    } else if (ins.kind == InstrKind::Fwd) {
      if (g.first_recompute == BackwardGap::kNone) g.first_recompute = i;
      if (g.backward_fwd[v] == BackwardGap::kNone) g.backward_fwd[v] = i;
    }
    if (const OpIds* reads = activation_reads(model, ins)) {
      for (int u : *reads) {
        const auto uu = static_cast<std::size_t>(u);
        if (before) {
          g.forward_last[uu] = i;
        } else if (g.backward_read[uu] == BackwardGap::kNone) {
          g.backward_read[uu] = i;
          g.read_by_fwd[uu] = ins.kind == InstrKind::Fwd;
        }
      }
    }
  }
  return g;
}

Schedule with_inserts(Schedule inner, const std::vector<std::pair<std::size_t, Instr>>& inserts) {
  const auto& code = inner.code;
  Schedule out;
  out.strategy = std::move(inner.strategy);
  out.note = std::move(inner.note);
  out.code.reserve(code.size() + inserts.size());
  std::size_t k = 0;
  for (std::size_t i = 0; i <= code.size(); ++i) {
    for (; k < inserts.size() && inserts[k].first == i; ++k) out.code.push_back(inserts[k].second);
    if (i < code.size()) out.code.push_back(code[i]);
  }
  return out;
}

}  // namespace remat
