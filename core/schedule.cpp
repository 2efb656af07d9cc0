#include "core/schedule.h"

#include "core/model.h"

namespace remat {

std::string_view instr_kind_name(InstrKind k) {
  switch (k) {
    case InstrKind::Fwd: return "fwd";
    case InstrKind::Bwd: return "bwd";
    case InstrKind::FreeAct: return "free A";
    case InstrKind::FreeGrad: return "free G";
    case InstrKind::FreeAux: return "free aux";
  }
  return "?";
}

std::string to_string(const Instr& instr, const Model& model) {
  const Op& op = model.op(instr.op);
  std::string s(instr_kind_name(instr.kind));
  const bool free = instr.kind != InstrKind::Fwd && instr.kind != InstrKind::Bwd;
  s += free ? "(" : " ";
  s += op.name.empty() ? "op" + std::to_string(instr.op) : op.name;
  if (free) s += ")";
  return s;
}

Schedule with_frees(const Model& model, std::vector<Instr> compute, std::string strategy) {
  const std::size_t n = compute.size();
  // Sweep backwards: the first read met (i.e. the last in program order) of a
  // tensor that is not live yet is its last use before the next definition.
  std::vector<uint8_t> live(static_cast<std::size_t>(model.size()), 0);
  std::vector<uint8_t> aux_live(static_cast<std::size_t>(model.size()), 0);
  std::vector<Instr> frees;            // activation and aux frees, grouped per instruction
  std::vector<uint32_t> free_end(n);   // frees[free_begin(i) .. free_end[i]) follow instruction i
  frees.reserve(n);
  std::vector<int32_t> reads;
  for (std::size_t k = n; k-- > 0;) {
    const Instr& ins = compute[k];
    const std::size_t before = frees.size();
    const Op& op = model.op(ins.op);
    const auto v = static_cast<std::size_t>(ins.op);
    if (ins.kind == InstrKind::Fwd) {
      if (!live[v]) frees.push_back({InstrKind::FreeAct, ins.op});  // never read: drop at once
      live[v] = 0;
      if (op.aux_bytes > 0) {
        if (!aux_live[v]) frees.push_back({InstrKind::FreeAux, ins.op});
        aux_live[v] = 0;
      }
    } else if (op.aux_bytes > 0 && !aux_live[v]) {
      frees.push_back({InstrKind::FreeAux, ins.op});
      aux_live[v] = 1;
    }
    const std::vector<int>& r = ins.kind == InstrKind::Fwd ? op.inputs : op.saved;
    for (int t : r) {
      auto& l = live[static_cast<std::size_t>(t)];
      if (!l) {
        frees.push_back({InstrKind::FreeAct, t});
        l = 1;
      }
    }
    free_end[k] = static_cast<uint32_t>(frees.size() - before);  // count for now
  }
  // `frees` holds the groups in reverse instruction order; lay them out forwards.
  Schedule s;
  s.strategy = std::move(strategy);
  s.code.reserve(n + frees.size() + n / 2 + 1);
  std::size_t end = frees.size();
  std::vector<std::size_t> group_start(n);
  for (std::size_t k = 0; k < n; ++k) {
    group_start[k] = end - free_end[k];
    end = group_start[k];
  }
  for (std::size_t k = 0; k < n; ++k) {
    const Instr& ins = compute[k];
    s.code.push_back(ins);
    if (ins.kind == InstrKind::Bwd && model.has_grad_tensor(ins.op)) s.code.push_back({InstrKind::FreeGrad, ins.op});
    for (std::size_t j = group_start[k]; j < group_start[k] + free_end[k]; ++j) s.code.push_back(frees[j]);
  }
  return s;
}

}  // namespace remat
