// A Pad op as its kernels see it: the mode and, per dimension, the extents
// and the padding before. pad_index.h says which input element each output
// element reads and which outputs each input's gradient sums.
#pragma once
#include <cstdint>

namespace remat {

enum class PadMode : uint8_t { Constant, Reflect, Replicate, Circular };

struct PadGeom {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  PadMode mode = PadMode::Constant;
  float value = 0;  // the constant mode's fill
  // Per dimension, outermost first: the input's and output's extents and the
  // padding before the first element (negative: that many cropped).
  int64_t in[kMaxRank] = {};
  int64_t out[kMaxRank] = {};
  int64_t before[kMaxRank] = {};
};

}  // namespace remat
