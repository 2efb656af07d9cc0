// Which tensors an instruction reads, by the memory model (DESIGN.md): fwd v
// reads A of v's inputs; bwd v reads A of saved(v), its private aux(v) when it
// has one, and G(v) (none for the loss: its seed is implicit); frees read nothing. The simulator checks
// exactly these reads; the window draws them as arrows from the running
// instruction.
#pragma once
#include <vector>

#include "core/resident_index.h"
#include "core/schedule.h"

namespace remat {

struct Model;

// Each tensor once, activations in input/saved order, then aux, then the gradient.
std::vector<TensorRef> tensors_read(const Model& model, const Instr& instr);

}  // namespace remat
