#include "core/parallel/block_stages.h"

#include "core/base/errors.h"

namespace remat {

std::vector<Block> repeated_block_run(const Model& model) {
  const std::vector<Block> chain = block_chain(model);
  std::size_t best = 0, best_len = 0;
  for (std::size_t i = 0; i < chain.size();) {
    std::size_t j = i;
    while (j < chain.size() && chain[j].repeated && chain[j].shape == chain[i].shape) ++j;
    if (j - i > best_len) best = i, best_len = j - i;
    i = j > i ? j : i + 1;
  }
  if (best_len < 2)
    throw InputError("--parallel: model '" + model.name +
                     "' has no repeated blocks in its graph (no run of equal blocks between cuts, as a transformer's "
                     "layers are): there is nothing to split into pipeline stages");
  return {chain.begin() + static_cast<std::ptrdiff_t>(best), chain.begin() + static_cast<std::ptrdiff_t>(best + best_len)};
}

Model block_stage_model(const Model& model, const std::vector<Block>& run, int first, int count, bool first_stage,
                        bool last_stage) {
  const Block& a = run[static_cast<std::size_t>(first)];
  const Block& b = run[static_cast<std::size_t>(first + count - 1)];
  const int lo = first_stage ? 1 : a.first, hi = last_stage ? model.loss() : b.last;
  Model m;
  m.name = model.name + " blocks " + std::to_string(first) + "-" + std::to_string(first + count - 1);
  std::vector<int> id(static_cast<std::size_t>(model.size()), -1);  // the model's op -> the stage's
  if (first_stage) {
    Op in = model.op(0);
    in.inputs.clear();
    id[0] = m.add(std::move(in));
  } else {  // the tensor received: A(first - 1), the cut before the stage's first block
    const Op& cut = model.op(a.first - 1);
    Op in;
    in.kind = OpKind::Input;
    in.name = "recv";
    in.dtype = cut.dtype;
    in.shape = cut.shape;
    id[static_cast<std::size_t>(a.first - 1)] = m.add(std::move(in));
  }
  auto mapped = [&](int v, int at) {
    const int x = id[static_cast<std::size_t>(v)];
    // A cut has no tensor crossing it but its own: a block reads nothing from before it.
    if (x < 0)
      throw InputError("--parallel: model '" + model.name + "': op " + std::to_string(at) + " reads op " + std::to_string(v) +
                       " from before its stage");
    return x;
  };
  for (int v = lo; v <= hi; ++v) {
    Op o = model.op(v);
    for (int& x : o.inputs) x = mapped(x, v);
    for (int& x : o.saved) x = x == v ? m.size() : mapped(x, v);  // an op may save its own output
    id[static_cast<std::size_t>(v)] = m.add(std::move(o), {}, true);
  }
  if (!last_stage) {  // its backward is the gradient received
    Op send;
    send.kind = OpKind::Generic;
    send.name = "send";
    send.dtype = model.op(hi).dtype;
    send.inputs = {id[static_cast<std::size_t>(hi)]};
    send.shape = {1};
    m.add(std::move(send), {}, true);
  }
  m.finalize();
  return m;
}

}  // namespace remat
