// Small models written op by op, for the tests that need a graph no preset
// makes (views, aux, dtypes).
#pragma once
#include <cstdint>
#include <vector>

#include "core/model/model.h"

namespace remat::testing {

// An op of kind `k` reading `in`, named after its kind and one past its last
// input ("ReLU1"), with `shape` (empty: inferred) and `dtype`.
Op make_op(OpKind k, std::vector<int> in, std::vector<int64_t> shape = {}, DType dtype = DType::F32);

// x [4,2] f32 (32 B) -> r = ReLU(x) (saves itself) -> t = Transpose(r), a view
// [2,4] of r's storage -> m = MatMul(t, r) [2,2] (16 B; mm saves both, views of
// one storage) -> MSE loss (4 B scalar).
Model view_graph();

// x [4,8] -> a = Linear(x) -> t = Tanh(a); r = Reshape(a) [2,16], a view of
// a's storage -> c = Reshape(r) [4,8], a copy (PyTorch's .contiguous()) ->
// z = c + t (with `linear_after_copy`: l = Linear(c), z = l + t) -> MSE loss.
// The gradient tests' model of a Reshape's gradient sharing storage
// (Model::shares_grad) while an Add's other part is added into it.
Model reshaped_into_add(bool linear_after_copy);

}  // namespace remat::testing
