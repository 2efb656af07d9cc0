// ONNX's moves of pixels and running sums, as torch.onnx.export writes them:
// DepthToSpace (pixel_shuffle exports as mode CRD; DCR is ONNX's default) and
// SpaceToDepth become the views a capture makes of pixel_shuffle (a Reshape
// splitting the channels or the spatial axes, a Transpose) and a Reshape that
// copies, PyTorch's one allocation; CumSum(x, constant axis) a Cumsum. Each
// returns false (the node becomes Generic) when the node is not that form.
#ifdef REMAT_HAVE_ONNX
#include "core/io/onnx_importer.h"

namespace remat::onnx_import {

bool Importer::depth_space(const NodeProto& n, int x) {
  const std::string& type = n.op_type();
  const Op& xop = model_.op(x);
  const std::vector<int64_t> in(xop.shape.begin(), xop.shape.end());
  const int64_t r = attr_int(n, "blocksize", 0);
  if (in.size() != 4 || r < 1) return false;
  const int64_t b = in[0], c = in[1], h = in[2], w = in[3];
  std::vector<int64_t> split, perm, out;
  if (type == "DepthToSpace") {
    if (c % (r * r) != 0) return false;
    const std::string mode = [&] {
      for (const auto& a : n.attribute())
        if (a.name() == "mode") return a.s();
      return std::string("DCR");
    }();
    if (mode == "CRD") {
      split = {b, c / (r * r), r, r, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else if (mode == "DCR") {
      split = {b, r, r, c / (r * r), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      return false;
    }
    out = {b, c / (r * r), h * r, w * r};
  } else {  // SpaceToDepth: blocks into channels, (r, r, C) order
    if (h % r != 0 || w % r != 0) return false;
    split = {b, c, h / r, r, w / r, r};
    perm = {0, 3, 5, 1, 2, 4};
    out = {b, c * r * r, h / r, w / r};
  }
  Op s;
  s.kind = OpKind::Reshape;
  s.name = op_name(n) + ".split";
  s.inputs = {x};
  s.shape = split;
  const int si = try_add(std::move(s), out0(n) + "#split", n);
  if (si < 0) return false;
  Op t;
  t.kind = OpKind::Transpose;
  t.name = op_name(n) + ".permute";
  t.inputs = {si};
  t.attrs.edit().perm = perm;
  const int ti = try_add(std::move(t), out0(n) + "#permute", n);
  if (ti < 0) return false;
  Op y;
  y.kind = OpKind::Reshape;
  y.name = op_name(n);
  y.inputs = {ti};
  y.shape = out;
  y.attrs.edit().copy = true;
  return try_add(std::move(y), out0(n), n) >= 0;
}

bool Importer::cumsum(const NodeProto& n, int x) {
  if (n.input_size() != 2 || attr_int(n, "exclusive", 0) != 0 || attr_int(n, "reverse", 0) != 0) return false;
  const auto axis = dense_now(n.input(1));
  if (!axis || axis->v.size() != 1) return false;
  Op op;
  op.kind = OpKind::Cumsum;
  op.name = op_name(n);
  op.inputs = {x};
  op.attrs.edit().axis = static_cast<int64_t>(axis->v[0]);
  return try_add(std::move(op), out0(n), n) >= 0;
}

}  // namespace remat::onnx_import
#endif
