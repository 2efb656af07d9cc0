#include "core/model/op_layout.h"

#include "core/model/op.h"

namespace remat {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::vector<int64_t> layout_of(const Op& op) { return op.strides->empty() ? contiguous_strides(op.shape) : *op.strides; }

bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// Walks the old dimensions from the last, grouping runs that are contiguous
// among themselves; each group of new dimensions must fill exactly one run.
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_shape,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size(), 1);
  if (old_shape.empty()) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    const auto du = static_cast<std::size_t>(d);
    tensor_numel *= old_shape[du];
    if (d == 0 || (old_shape[du - 1] != 1 && old_strides[du - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[static_cast<std::size_t>(view_d)] == 1)) {
        out[static_cast<std::size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= shape[static_cast<std::size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[du - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

bool folds_broadcast(const Op& x, const std::vector<int64_t>& expanded, const std::vector<int64_t>& folded) {
  const std::vector<int64_t> st = layout_of(x);
  // Broadcast batch dimensions read the same elements again: stride 0.
  const std::size_t lead = expanded.size() - x.shape.size();
  std::vector<int64_t> est(expanded.size(), 0);
  for (std::size_t i = 0; i < x.shape.size(); ++i) est[lead + i] = x.shape[i] == expanded[lead + i] ? st[i] : 0;
  return view_strides(expanded, est, folded).has_value();
}

MatmulCopies matmul_copies(const Op& a, const Op& b, const std::vector<int64_t>& batch) {
  const int64_t n = a.shape.at(a.shape.size() - 2), k = a.shape.back(), m = b.shape.back();
  int64_t bp = 1;
  for (const int64_t d : batch) bp *= d;
  if (a.shape.size() == 2 && b.shape.size() == 2) return {};  // mm reads any strides
  if (b.shape.size() == 2) return {!folds_broadcast(a, a.shape, {bp * n, k}), false};
  std::vector<int64_t> ea = batch, eb = batch;
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k, m});
  return {!folds_broadcast(a, ea, {bp, n, k}), !folds_broadcast(b, eb, {bp, k, m})};
}

}  // namespace remat
