// What the widening call of mixed precision (mixed_call.h) takes from the
// backend that runs it: scratch for its f32 copies, and which dtypes are
// stored narrow. Apart from cpu_mixed.h so that the call, which the CPU
// backend instantiates, does not include the CPU backend back.
#pragma once
#include <cstdint>

#include "core/model/op.h"

namespace remat {

// Scratch for one call's widened copies: taken during the call, all given
// back after it. take() throws DeviceOutOfMemory when it cannot.
class MixedScratch {
 public:
  virtual ~MixedScratch() = default;
  virtual float* take(int64_t floats) = 0;
  virtual void give_back_all() = 0;
};

// bf16 or f16.
inline bool is_low_precision(DType d) { return d == DType::BF16 || d == DType::F16; }

}  // namespace remat
