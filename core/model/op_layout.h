// Where a tensor's elements sit in its storage (element strides), as PyTorch
// lays them out: what decides whether a reshape is a view or a copy, and
// whether a matmul must copy an input before it multiplies (and saves) it.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace remat {

struct Op;

// Row-major strides of a freshly allocated tensor.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// An op's element strides in its storage (a view's, or an owner's contiguous ones).
std::vector<int64_t> layout_of(const Op& op);
// True when the elements are dense in row-major order (size-1 dims ignored).
bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
// Strides of `shape` viewing the same elements as (old_shape, old_strides), or
// nullopt when no view exists and PyTorch's reshape copies (its computeStride).
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_shape,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& shape);

// Whether `x`, broadcast to `expanded` (its dimensions right-aligned; a size-1
// or missing one repeats with stride 0), reads as `folded` through strides:
// a matmul then multiplies it in place, else PyTorch's reshape copies it.
bool folds_broadcast(const Op& x, const std::vector<int64_t>& expanded, const std::vector<int64_t>& folded);
// Which operands of torch.matmul(a, b) are copied before the product (and the
// copy saved): `batch` is the product's broadcast batch dimensions. Rank 2 @
// rank 2 is one mm (any strides); (..., n, k) @ (k, m) folds a to (batch·n, k)
// for one mm; otherwise both are expanded to the batch and folded for bmm.
struct MatmulCopies {
  bool a = false, b = false;
};
MatmulCopies matmul_copies(const Op& a, const Op& b, const std::vector<int64_t>& batch);

}  // namespace remat
