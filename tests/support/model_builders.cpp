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

Model reshaped_into_add(bool linear_after_copy) {
  Model m;
  m.add(make_op(OpKind::Input, {}, {4, 8}));
  const int a = m.add(make_op(OpKind::Linear, {0}, {4, 8}));
  const int t = m.add(make_op(OpKind::Tanh, {a}));
  const int r = m.add(make_op(OpKind::Reshape, {a}, {2, 16}));  // a view
  Op copy = make_op(OpKind::Reshape, {r}, {4, 8});
  copy.attrs.edit().copy = true;
  int c = m.add(std::move(copy));
  if (linear_after_copy) c = m.add(make_op(OpKind::Linear, {c}, {4, 8}));
  const int z = m.add(make_op(OpKind::Add, {c, t}));
  m.add(make_op(OpKind::MSELoss, {z}));
  m.finalize();
  return m;
}

}  // namespace remat::testing
