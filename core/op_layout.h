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

}  // namespace remat
