#include "core/sim/instr_reads.h"

#include <algorithm>

#include "core/model/model.h"

namespace remat {

std::vector<TensorRef> tensors_read(const Model& model, const Instr& ins) {
  std::vector<TensorRef> out;
  auto add = [&](TensorRef t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  const Op& op = model.op(ins.op);
  switch (ins.kind) {
    case InstrKind::Fwd:
      for (int u : op.inputs) add({u, false});
      break;
    case InstrKind::Bwd:
      for (int s : op.saved) add({s, false});
      if (op.aux_bytes > 0) add({ins.op, false, true});
      if (model.has_grad_tensor(ins.op)) add({ins.op, true});
      break;
    case InstrKind::CompressBF16:  // converts A(op) into C(op)
    case InstrKind::CompressF16:
    case InstrKind::CompressInt8:
      add({ins.op, false});
      break;
    case InstrKind::Decompress:  // widens C(op) back into A(op)
      add({ins.op, false, false, true});
      break;
    case InstrKind::FreePacked:
    case InstrKind::FreeAct:
    case InstrKind::FreeGrad:
    case InstrKind::FreeAux:
    case InstrKind::Offload:  // moves A(op), reads nothing the step computes with
    case InstrKind::Fetch:
      break;
  }
  return out;
}

}  // namespace remat
