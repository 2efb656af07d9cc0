#include "core/sim/schedule.h"

#include <algorithm>

#include "core/sim/compression.h"
#include "core/model/model.h"
#include "core/base/prefault.h"

namespace remat {

std::string_view instr_kind_name(InstrKind k) {
  switch (k) {
    case InstrKind::Fwd: return "fwd";
    case InstrKind::Bwd: return "bwd";
    case InstrKind::FreeAct: return "free A";
    case InstrKind::FreeGrad: return "free G";
    case InstrKind::FreeAux: return "free aux";
    case InstrKind::Offload: return "offload A";
    case InstrKind::Fetch: return "fetch A";
    case InstrKind::CompressBF16:
    case InstrKind::CompressF16:
    case InstrKind::CompressInt8: return "compress A";
    case InstrKind::Decompress: return "decompress A";
    case InstrKind::FreePacked: return "free C";
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
  if (is_compress(instr.kind)) s += " to " + std::string(packing_name(packing_of(instr.kind)));
  return s;
}

uint64_t instructions_with_frees(const Model& model, uint64_t forward_steps, uint64_t aux_forward_steps) {
  const auto n = static_cast<uint64_t>(model.size());
  uint64_t grads = 0;  // integer outputs (ids) have none
  for (int v = 0; v < model.size(); ++v) grads += model.has_grad_tensor(v);
  return 2 * forward_steps + aux_forward_steps + n + grads;
}

Schedule with_frees(const Model& model, std::vector<Instr> compute, std::string strategy) {
  // Sweep backwards: the first read met (i.e. the last in program order) of a
  // tensor that is not live yet is its last use before the next definition, so
  // its free follows that instruction. The result is written back to front and
  // reversed once: no per-instruction bookkeeping beyond the live flags.
  std::vector<uint8_t> live(static_cast<std::size_t>(model.size()), 0);
  std::vector<uint8_t> aux_live(static_cast<std::size_t>(model.size()), 0);
  uint64_t fwd = 0, fwd_aux = 0;
  for (const Instr& ins : compute) {
    if (ins.kind != InstrKind::Fwd) continue;
    ++fwd;
    fwd_aux += model.op(ins.op).aux_bytes > 0;
  }
  Schedule s;
  s.strategy = std::move(strategy);
  reserve_prefaulted(s.code, static_cast<std::size_t>(instructions_with_frees(model, fwd, fwd_aux)));
  std::vector<Instr> group;  // frees after one instruction, in the order found
  for (std::size_t k = compute.size(); k-- > 0;) {
    const Instr ins = compute[k];
    const Op& op = model.op(ins.op);
    const auto v = static_cast<std::size_t>(ins.op);
    group.clear();
    if (ins.kind == InstrKind::Fwd) {
      if (!live[v]) group.push_back({InstrKind::FreeAct, ins.op});  // never read: drop at once
      live[v] = 0;
      if (op.aux_bytes > 0) {
        if (!aux_live[v]) group.push_back({InstrKind::FreeAux, ins.op});
        aux_live[v] = 0;
      }
    } else if (op.aux_bytes > 0 && !aux_live[v]) {
      group.push_back({InstrKind::FreeAux, ins.op});
      aux_live[v] = 1;
    }
    const OpIds& r = ins.kind == InstrKind::Fwd ? op.inputs : op.saved;
    for (int t : r) {
      auto& l = live[static_cast<std::size_t>(t)];
      if (!l) {
        group.push_back({InstrKind::FreeAct, t});
        l = 1;
      }
    }
    // In program order: the instruction, G's free after a backward, then the group.
    for (auto g = group.rbegin(); g != group.rend(); ++g) s.code.push_back(*g);
    if (ins.kind == InstrKind::Bwd && model.has_grad_tensor(ins.op)) s.code.push_back({InstrKind::FreeGrad, ins.op});
    s.code.push_back(ins);
  }
  std::reverse(s.code.begin(), s.code.end());
  return s;
}

}  // namespace remat
