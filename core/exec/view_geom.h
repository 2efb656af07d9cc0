#pragma once
// A view's map (op_exec.h's ViewMap) as the pointwise family's geometry, so
// that a backend runs its copies and its gradient's adds and sums on the
// pointwise kernels (the CUDA ones coalesce the dimensions and index in 32
// bits; the dedicated strided kernels divide a 64-bit index per dimension).
// Each returns false where the map does not fit (rank over 8, a map that
// sends several elements to one, an input not in row-major order).
#include "core/exec/op_exec.h"
#include "core/kernels/cpu_kernels.h"

namespace remat {

// y (row-major over m.shape) = x read at m's offsets (from x's first
// element: m.base is the caller's): Cast of one operand.
bool copy_geom(const ViewMap& m, cpu::PwGeom& g);
// x at m's offsets (+)= dy (row-major over m.shape): Add of (x through m,
// dy), written back through m. The map must be one to one (no stride 0 over
// a dimension of size > 1).
bool add_back_geom(const ViewMap& m, cpu::PwGeom& g);
// An Expand's input gradient, dx (row-major over the input) = or += the sum
// of the dy elements m sends to each: Cast's gradient with respect to its
// broadcast operand, where the kept dimensions' strides are the input's
// row-major ones (a norm's weight or statistics; m.base 0).
bool expand_sum_geom(const ViewMap& m, cpu::PwGeom& g);

}  // namespace remat
