#include "tests/support/model_builders.h"

#include <string>

namespace remat::testing {

Op make_op(OpKind k, std::vector<int> in, std::vector<int64_t> shape, DType dtype) {
  Op op;
  op.kind = k;
  op.name = std::string(kind_name(k)) + std::to_string(in.empty() ? 0 : in.back() + 1);
  op.inputs = std::move(in);
  op.shape = std::move(shape);
  op.dtype = dtype;
  return op;
}

Model view_graph() {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 2}));
  m.add(make_op(OpKind::ReLU, {0}));
  m.add(make_op(OpKind::Transpose, {1}));
  m.add(make_op(OpKind::MatMul, {2, 1}));
  m.add(make_op(OpKind::MSELoss, {3}));
  m.finalize();
  return m;
}

}  // namespace remat::testing
