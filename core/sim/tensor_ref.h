// A tensor of the memory model, named by its op: the activation A(op) (a
// view's alias too), the gradient G(op), the op's private saved tensors
// aux(op), or C(op), A(op)'s compressed copy on the device
// (docs/memory-model.md#compressed-checkpoints; its type is the compress
// instruction's). Its own header so that what names tensors (instr_reads) needs
// nothing of what tracks them (resident_index, the simulator).
#pragma once
#include <cstdint>

namespace remat {

struct TensorRef {
  int32_t op;
  bool grad;
  bool aux = false;
  bool packed = false;  // C(op)
  bool operator==(const TensorRef&) const = default;
};

}  // namespace remat
