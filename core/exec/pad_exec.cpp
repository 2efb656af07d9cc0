#include "core/exec/pad_exec.h"

#include "core/base/errors.h"

namespace remat {

PadGeom pad_geom(const Model& m, int v) {
  const Op& op = m.op(v);
  const Op& x = m.op(op.inputs.at(0));
  const auto& pads = op.attrs->pads;
  const std::size_t rank = x.shape.size(), k = pads.size() / 2;
  if (rank > static_cast<std::size_t>(PadGeom::kMaxRank) || k > rank || op.shape.size() != rank)
    throw InputError("op " + std::to_string(v) + ": a Pad the kernels cannot run (rank over 8 or pads past the input's rank)");
  PadGeom g;
  g.mode = static_cast<PadMode>(op.attrs->pad_mode);
  g.value = op.attrs->scalar;
  const std::size_t lead = rank - k;  // dimensions nothing pads: one
  int64_t planes = 1;
  for (std::size_t d = 0; d < lead; ++d) planes *= x.shape[d];
  g.rank = 0;
  if (lead > 0 || k == 0) {
    g.in[0] = g.out[0] = planes;
    g.rank = 1;
  }
  for (std::size_t d = lead; d < rank; ++d, ++g.rank) {
    g.in[g.rank] = x.shape[d];
    g.out[g.rank] = op.shape[d];
    g.before[g.rank] = pads[2 * (rank - 1 - d)];
  }
  return g;
}

}  // namespace remat
