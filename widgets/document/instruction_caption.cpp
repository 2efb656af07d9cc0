#include "widgets/document/instruction_caption.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/sim/compression.h"
#include "core/strategies/registry.h"
#include "core/model/model.h"
#include "widgets/document/node_states.h"

namespace remat {

std::string InstructionCaption::name(int op) const {
  const std::string& n = model_->op(op).name;
  return n.empty() ? "op" + std::to_string(op) : n;
}

std::string InstructionCaption::names(const std::vector<int>& ops) const {
  std::string s;
  for (std::size_t i = 0; i < ops.size(); ++i) s += (i ? ", " : "") + name(ops[i]);
  return s;
}

namespace {
bool among(const std::vector<std::size_t>& sorted, std::size_t t) { return std::binary_search(sorted.begin(), sorted.end(), t); }
}  // namespace

bool InstructionCaption::reads_act(const Instr& ins, int op) const {
  const Op& o = model_->op(ins.op);
  if (ins.kind == InstrKind::Fwd) return std::find(o.inputs.begin(), o.inputs.end(), op) != o.inputs.end();
  if (ins.kind == InstrKind::Bwd) return std::find(o.saved.begin(), o.saved.end(), op) != o.saved.end();
  return false;
}

std::string InstructionCaption::eviction_reason() const {
  std::size_t h = 0;  // the spec's heuristic (left out: the first)
  if (const auto& spec = facts_->spec(); spec && spec->parameters.size() > 1)
    h = static_cast<std::size_t>(spec->parameters[1]);
  switch (h) {
    case 1: return "it is the cheapest to recompute per byte and the stalest, counting the evicted neighbours it "
                   "would bring back (h-dtr-eq)";
    case 2: return "it is the stalest, read longest ago (lru)";
    case 3: return "it holds the most bytes (largest)";
    default: return "it is the cheapest to recompute per byte and the stalest (h-dtr)";
  }
}

std::string InstructionCaption::text(std::size_t t) const {
  const auto& code = schedule_->code;
  if (t >= code.size()) return {};
  const Instr ins = code[t];
  const int v = ins.op;
  const Op& op = model_->op(v);
  switch (ins.kind) {
    case InstrKind::Fwd: {
      const bool first = facts_->first_fwd(v) == t;
      std::string from;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const int u = op.inputs[i];
        from += (i ? ", " : "");
        from += (!first && facts_->is_checkpoint(u) ? "checkpoint " : "") + name(u);
      }
      if (first) return "forward: computing " + name(v) + (from.empty() ? "" : " from " + from);
      // Why: the next backward step after t is the one this recompute serves.
      std::string why;
      for (std::size_t i = t + 1; i < code.size(); ++i) {
        if (code[i].kind != InstrKind::Bwd) continue;
        why = reads_act(code[i], v) ? " because the backward of " + name(code[i].op) + " needs it"
                                    : " on the way to what the backward of " + name(code[i].op) + " needs";
        break;
      }
      return "recomputing " + name(v) + (from.empty() ? "" : " from " + from) + why;
    }
    case InstrKind::FreeAct: {
      for (std::size_t i = t + 1; i < code.size(); ++i) {
        if (code[i].kind == InstrKind::Fwd && code[i].op == v) {
          if (facts_->decides_live()) {
            if (among(schedule_->evictions, t))
              return "evicting " + name(v) + ": memory was full, and " + eviction_reason() +
                     "; it is recomputed when it is read again";
            if (among(schedule_->fallback_frees, t))
              return "freeing " + name(v) + ": the heuristic found nothing left to evict, so this step is prepared as "
                     "recompute-all prepares it; " + name(v) + " is recomputed when it is read again";
            if (op.aux_bytes > 0)  // dtr frees A(v) to remake aux(v), evicted alone, without a second copy
              return "freeing " + name(v) + ": aux(" + name(v) + ") was evicted, and recomputing " + name(v) +
                     " makes both again";
          }
          return "freeing " + name(v) + ": it will be recomputed when it is needed again";
        }
        // Freed after its compress: the smaller copy is what waits.
        if (code[i].kind == InstrKind::Decompress && code[i].op == v) {
          const Packing p = facts_->packing(v);
          return "freeing " + name(v) + ": its compressed copy (" + std::string(packing_name(p)) + ", " +
                 std::to_string(packed_bytes(op.bytes, p)) + " B of " + std::to_string(op.bytes) +
                 " B) waits until it is decompressed";
        }
        if (reads_act(code[i], v)) break;  // cannot happen in a valid schedule
      }
      return "freeing " + name(v) + ": nothing later reads it";
    }
    case InstrKind::FreeGrad:
      return "freeing G(" + name(v) + "): the backward of " + name(v) + " has consumed it";
    case InstrKind::FreeAux:
      if (facts_->decides_live() && among(schedule_->evictions, t))
        return "evicting aux(" + name(v) + "): memory was full, and " + eviction_reason() +
               "; it is recomputed with " + name(v) + " before its backward";
      return "freeing aux(" + name(v) + ") (what only its backward reads: statistics, indices, a mask)" +
             (facts_->bwd_at(v) < t ? std::string(": its backward has run") : std::string(": it will be recomputed first"));
    case InstrKind::Offload:
    case InstrKind::Fetch: {
      // The next instruction that reads it: what the copy waits for (offload) or serves (fetch).
      std::string reader;
      for (std::size_t i = t + 1; i < code.size() && reader.empty(); ++i) {
        if (code[i].kind == InstrKind::Fwd || code[i].kind == InstrKind::Bwd)
          if (reads_act(code[i], v))
            reader = (code[i].kind == InstrKind::Fwd ? "the recompute of " : "the backward of ") + name(code[i].op);
      }
      // Under a compress modifier the copy that moves may be C(v): the last
      // conversion of v before t says which form is there.
      std::string what = name(v);
      for (std::size_t i = t; i-- > 0;) {
        if (code[i].op != v) continue;
        if (is_compress(code[i].kind)) {
          const Packing p = packing_of(code[i].kind);
          what = "the compressed copy of " + name(v) + " (" + std::string(packing_name(p)) + ", " +
                 std::to_string(packed_bytes(op.bytes, p)) + " B)";
        }
        if (is_compress(code[i].kind) || code[i].kind == InstrKind::Decompress || code[i].kind == InstrKind::Fwd) break;
      }
      if (ins.kind == InstrKind::Offload)
        return "offloading " + what + " to host memory: its device bytes are free until " +
               (reader.empty() ? std::string("it is fetched") : reader + " needs it");
      return "fetching " + what + " back from host memory" + (reader.empty() ? std::string() : " ahead of " + reader) +
             " (the copy overlaps the compute in between)";
    }
    case InstrKind::CompressBF16:
    case InstrKind::CompressF16:
    case InstrKind::CompressInt8:
      return "compressing " + name(v) + " to " + std::string(packing_name(packing_of(ins.kind))) +
             ": the checkpoint waits for its recompute in " +
             std::to_string(packed_bytes(op.bytes, packing_of(ins.kind))) + " B instead of " +
             std::to_string(op.bytes) + " B";
    case InstrKind::Decompress:
      return "decompressing " + name(v) + " for the recompute that reads it (its values carry the rounding)";
    case InstrKind::FreePacked:
      return "freeing the compressed copy of " + name(v) + ": it has been decompressed";
    case InstrKind::Bwd: {
      std::string s = "backward of " + name(v) + ": reads ";
      s += model_->has_grad_tensor(v) ? "G(" + name(v) + ")" : "the loss seed";
      if (!op.saved.empty()) s += " and " + names(op.saved);
      if (op.aux_bytes > 0) s += " and aux(" + name(v) + ")";
      std::vector<int> writes;
      for (int u : op.inputs)
        if (model_->has_grad_tensor(u)) writes.push_back(u);
      if (!writes.empty()) {
        s += "; writes ";
        for (std::size_t i = 0; i < writes.size(); ++i) s += (i ? ", " : "") + ("G(" + name(writes[i]) + ")");
      }
      return s;
    }
  }
  return {};
}

}  // namespace remat
