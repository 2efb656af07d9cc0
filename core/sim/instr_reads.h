// Which tensors an instruction reads, by the memory model (docs/memory-model.md): fwd v
// reads A of v's inputs; bwd v reads A of saved(v), its private aux(v) when it
// has one, and G(v) (none for the loss: its seed is implicit); compress v reads
// A(v), decompress v reads C(v); frees, offloads and fetches read nothing. The simulator checks
// exactly these reads; the window draws them as arrows from the running
// instruction.
#pragma once
#include <vector>

#include "core/model/model.h"
#include "core/sim/schedule.h"
#include "core/sim/tensor_ref.h"

namespace remat {

// Each tensor once, activations in input/saved order, then aux, then the gradient.
std::vector<TensorRef> tensors_read(const Model& model, const Instr& instr);

// The activations alone, without allocating (for passes over every
// instruction): A of these ops; nullptr for instructions that read none
// (frees, offload and fetch: a copy is not a read of the model; compress and
// decompress, which convert a tensor's storage rather than compute with it).
inline const OpIds* activation_reads(const Model& model, Instr ins) {
  if (ins.kind == InstrKind::Fwd) return &model.op(ins.op).inputs;
  if (ins.kind == InstrKind::Bwd) return &model.op(ins.op).saved;
  return nullptr;
}

}  // namespace remat
