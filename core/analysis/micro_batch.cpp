#include "core/analysis/micro_batch.h"

#include <string>

#include "core/base/errors.h"
#include "core/model/op_rules.h"

namespace remat {

Model micro_batch(Model model, int k) {
  if (k < 1) throw InputError("--micro-batches: " + std::to_string(k) + " must be at least 1");
  if (k == 1) return model;
  const Op& input = model.op(0);
  const int64_t batch = input.shape.empty() ? 1 : input.shape[0];
  if (input.shape.empty() || batch % k != 0)
    throw InputError("--micro-batches " + std::to_string(k) + ": does not divide the batch (" + std::to_string(batch) +
                     ", the first dimension of the input " + shape_string(input.shape) + ")");
  Model out;
  out.name = model.name + " (micro-batch of " + std::to_string(batch / k) + ")";
  for (int v = 0; v < model.size(); ++v) {
    Op op = model.op(v);
    const bool scalar = op.shape.empty() || (v == model.loss() && op.numel() == 1);
    if (!scalar) {
      if (op.shape[0] % batch != 0)
        throw InputError("--micro-batches: op '" + op.name + "' has shape " + shape_string(op.shape) +
                         ", whose first dimension is not a multiple of the batch (" + std::to_string(batch) +
                         "): micro-batching needs the batch to lead every activation");
      op.shape[0] /= k;
    }
    // The rules derive the rest from the new shape: a size-1 dimension can make
    // a layout contiguous, which changes what a matmul saves and copies.
    const bool generic = op.kind == OpKind::Generic;
    if (generic) {
      const double kd = static_cast<double>(k);
      op.fwd_flops /= kd;
      op.bwd_flops /= kd;
      op.bytes = (op.bytes + k - 1) / k;
      op.aux_bytes = (op.aux_bytes + k - 1) / k;
    } else {
      op.fwd_flops = op.bwd_flops = 0;
      op.bytes = op.aux_bytes = 0;
      op.saved.clear();
    }
    out.add(std::move(op), "op '" + model.op(v).name + "'", /*explicit_saved=*/generic);
  }
  out.finalize();
  return out;
}

}  // namespace remat
