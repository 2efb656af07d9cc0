// ONNX's Pad as one Pad op: mode constant (its constant_value, negative pads
// crop), reflect, edge (replicate) or wrap (circular, opset 19); the pads an
// initializer or folded constant input (opset 11+) or the attribute (before),
// in ONNX's order (every dimension's begin, then every end), turned into
// F.pad's (the last dimension first, a pair each) over the last dimensions
// that are padded — at least all but batch and channels, as PyTorch's
// reflect and replicate pads take them. An axes input is not imported.
#ifdef REMAT_HAVE_ONNX
#include <algorithm>

#include "core/io/onnx_importer.h"
#include "core/kernels/pad_geom.h"

namespace remat::onnx_import {

bool Importer::pad(const NodeProto& n, int x) {
  const std::size_t rank = model_.op(x).shape.size();
  std::vector<int64_t> pads = attr_ints(n, "pads");
  float value = attr_float(n, "value", 0.0f);
  if (opset_ >= 11) {
    if (n.input_size() < 2 || n.input(1).empty() || (n.input_size() > 3 && !n.input(3).empty())) return false;
    // torch computes the pads by shape arithmetic: folded now if not yet.
    const auto v = dense_now(n.input(1));
    if (!v) return false;
    pads.clear();
    for (const double p : v->v) pads.push_back(static_cast<int64_t>(p));
    value = 0.0f;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const auto c = dense_now(n.input(2));
      if (!c || c->v.size() != 1) return false;
      value = static_cast<float>(c->v[0]);
    }
  }
  if (rank == 0 || pads.size() != 2 * rank) return false;
  std::string mode = "constant";
  for (const auto& a : n.attribute())
    if (a.name() == "mode") mode = a.s();
  PadMode m;
  if (mode == "constant") m = PadMode::Constant;
  else if (mode == "reflect") m = PadMode::Reflect;
  else if (mode == "edge") m = PadMode::Replicate;
  else if (mode == "wrap") m = PadMode::Circular;
  else return false;
  std::size_t first = rank;  // the first padded dimension
  for (std::size_t d = 0; d < rank; ++d)
    if (pads[d] != 0 || pads[rank + d] != 0) first = std::min(first, d);
  std::size_t k = rank - first;
  if (m != PadMode::Constant) k = std::min<std::size_t>(std::max<std::size_t>(k, rank >= 3 ? rank - 2 : 1), 3);
  Op op;
  op.kind = OpKind::Pad;
  op.name = op_name(n);
  op.inputs = {x};
  OpAttrs& a = op.attrs.edit();
  a.pad_mode = static_cast<uint8_t>(m);
  a.scalar = m == PadMode::Constant ? value : 0.0f;
  for (std::size_t j = 0; j < k; ++j) {
    const std::size_t d = rank - 1 - j;
    a.pads.push_back(pads[d]);
    a.pads.push_back(pads[rank + d]);
  }
  return try_add(std::move(op), out0(n), n) >= 0;
}

}  // namespace remat::onnx_import

#endif  // REMAT_HAVE_ONNX
