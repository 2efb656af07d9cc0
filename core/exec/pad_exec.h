// A Pad op's geometry for the kernels of both backends (core/kernels/pad_geom.h).
#pragma once
#include "core/kernels/pad_geom.h"
#include "core/model/model.h"

namespace remat {

// Op v's input and output extents and the padding before each dimension, from
// its pads in PyTorch's order; the leading dimensions nothing pads folded into one.
PadGeom pad_geom(const Model& model, int v);

}  // namespace remat
