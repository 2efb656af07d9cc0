// CPU backend gradients against a float64 reference: a double-precision
// replica of each op's forward, differentiated by central differences, at the
// very float32 parameter values the executor used. One small model per op kind,
// plus whole presets.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "core/kernels/cpu_kernels.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// Loss of the model in float64 with the given parameters (parallel to parameter_tensors).
double reference_loss(const Model& m, const HostData& d, const std::vector<std::vector<double>>& params) {
  const auto tensors = parameter_tensors(m);
  auto param = [&](int v, int slot) -> const std::vector<double>& {
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      if (tensors[k].op == v && tensors[k].slot == slot) return params[k];
    }
    throw std::logic_error("no parameter");
  };
  std::vector<std::vector<double>> A(static_cast<std::size_t>(m.size()));
  if (d.ids.empty()) A[0].assign(d.input.begin(), d.input.end());
  else A[0].assign(d.ids.begin(), d.ids.end());
  for (int v = 1; v < m.size(); ++v) {
    const Op& op = m.op(v);
    const auto& x = A[static_cast<std::size_t>(op.inputs[0])];
    const Op& in = m.op(op.inputs[0]);
    auto& y = A[static_cast<std::size_t>(v)];
    y.assign(static_cast<std::size_t>(op.numel()), 0.0);
    auto act = [](Activation a, double z) { return a == Activation::ReLU ? std::max(z, 0.0) : a == Activation::Tanh ? std::tanh(z) : z; };
    switch (op.kind) {
      case OpKind::Linear:
      case OpKind::Dense: {
        const auto& W = param(v, 0);
        const auto& b = param(v, 1);
        const int64_t rows = in.rows(), fin = in.cols(), fout = op.cols();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < fout; ++o) {
            double s = b[o];
            for (int64_t i = 0; i < fin; ++i) s += x[r * fin + i] * W[o * fin + i];
            y[r * fout + o] = op.kind == OpKind::Dense ? act(op.act, s) : s;
          }
        break;
      }
      case OpKind::ReLU: for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::max(x[i], 0.0); break;
      case OpKind::Tanh: for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::tanh(x[i]); break;
      case OpKind::GELU:
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
        break;
      case OpKind::LayerNorm: {
        const auto& g = param(v, 0);
        const auto& b = param(v, 1);
        const int64_t rows = op.rows(), cols = op.cols();
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
          mean /= cols;
          for (int64_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
          var /= cols;
          const double rstd = 1.0 / std::sqrt(var + 1e-5);
          for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = (x[r * cols + c] - mean) * rstd * g[c] + b[c];
        }
        break;
      }
      case OpKind::Add: {
        const auto& x2 = A[static_cast<std::size_t>(op.inputs[1])];
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i] + x2[i];
        break;
      }
      case OpKind::Dropout:
        for (std::size_t i = 0; i < y.size(); ++i)
          y[i] = cpu::dropout_keep(d.seed, static_cast<uint32_t>(v), i, op.dropout_p) ? x[i] / (1.0 - op.dropout_p) : 0.0;
        break;
      case OpKind::MSELoss: {
        double s = 0;
        for (std::size_t i = 0; i < x.size(); ++i) s += (x[i] - d.target[i]) * (x[i] - d.target[i]);
        return s / static_cast<double>(x.size());
      }
      case OpKind::SoftmaxCELoss: {
        const int64_t rows = in.rows(), cols = in.cols();
        double s = 0;
        for (int64_t r = 0; r < rows; ++r) {
          double mx = -1e300;
          for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, x[r * cols + c]);
          double z = 0;
          for (int64_t c = 0; c < cols; ++c) z += std::exp(x[r * cols + c] - mx);
          s += mx + std::log(z) - x[r * cols + d.labels[r]];
        }
        return s / static_cast<double>(rows);
      }
      case OpKind::Embedding: {
        const auto& W = param(v, 0);
        const int64_t dim = op.cols();
        for (std::size_t i = 0; i < x.size(); ++i)
          for (int64_t j = 0; j < dim; ++j) y[i * dim + j] = W[static_cast<std::size_t>(x[i]) * dim + j];
        break;
      }
      case OpKind::MulConst:
      case OpKind::DivConst:
      case OpKind::AddConst:
      case OpKind::MaskedFill: {
        std::vector<double> c;
        if (op.attrs->learned) c = param(v, 0);
        else c.assign(op.attrs->values.data(), op.attrs->values.data() + op.attrs->values.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          const double k = c[i % c.size()];
          y[i] = op.kind == OpKind::MulConst ? x[i] * k : op.kind == OpKind::DivConst ? x[i] / k
               : op.kind == OpKind::AddConst ? x[i] + k : k != 0 ? op.attrs->fill : x[i];
        }
        break;
      }
      case OpKind::Transpose: {  // y[idx] = x[idx permuted back], any rank
        const std::vector<int64_t> xs(in.shape.begin(), in.shape.end());
        std::vector<int64_t> idx(op.shape.size(), 0);
        for (std::size_t i = 0; i < y.size(); ++i) {
          int64_t rest = static_cast<int64_t>(i);
          for (std::size_t a = op.shape.size(); a-- > 0;) {
            idx[a] = rest % op.shape[a];
            rest /= op.shape[a];
          }
          std::vector<int64_t> xi(xs.size());
          for (std::size_t a = 0; a < idx.size(); ++a) xi[static_cast<std::size_t>(op.attrs->perm[a])] = idx[a];
          int64_t at = 0;
          for (std::size_t a = 0; a < xs.size(); ++a) at = at * xs[a] + xi[a];
          y[i] = x[static_cast<std::size_t>(at)];
        }
        break;
      }
      case OpKind::MatMul: {  // (batch, m, k) @ (batch, k, n)
        const auto& b = A[static_cast<std::size_t>(op.inputs[1])];
        const Op& bop = m.op(op.inputs[1]);
        const int64_t rows = in.shape[in.shape.size() - 2], k = in.cols(), n = bop.cols();
        const int64_t batch = in.numel() / (rows * k);
        for (int64_t q = 0; q < batch; ++q)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0;
              for (int64_t t = 0; t < k; ++t) sum += x[(q * rows + i) * k + t] * b[(q * k + t) * n + j];
              y[(q * rows + i) * n + j] = sum;
            }
        break;
      }
      default: throw std::logic_error("kind");
    }
  }
  throw std::logic_error("no loss");
}

void expect_gradients_match_reference(const Model& m, const std::string& strategy = "sqrt") {
  CpuBackend cpu;
  const ExecOptions o = quick(11);
  const ExecResult r = execute(m, schedule_of(m, strategy), cpu, o);
  ASSERT_TRUE(r.ok()) << r.message;
  const HostData d = make_host_data(m, o.seed);
  std::vector<std::vector<double>> p;
  for (const auto& t : d.params) p.emplace_back(t.begin(), t.end());
  const double loss = reference_loss(m, d, p);
  EXPECT_NEAR(r.loss, loss, 1e-5 * std::max(1.0, std::abs(loss)));
  const auto tensors = parameter_tensors(m);
  ASSERT_EQ(r.param_grads.size(), tensors.size());
  const double h = 1e-5;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    std::vector<double> ref(p[k].size());
    double scale = 0;
    for (std::size_t i = 0; i < p[k].size(); ++i) {
      const double saved = p[k][i];
      p[k][i] = saved + h;
      const double up = reference_loss(m, d, p);
      p[k][i] = saved - h;
      const double down = reference_loss(m, d, p);
      p[k][i] = saved;
      ref[i] = (up - down) / (2 * h);
      scale = std::max(scale, std::abs(ref[i]));
    }
    ASSERT_GT(scale, 0.0) << tensors[k].name << " has no gradient at all";
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(r.param_grads[k][i], ref[i], 1e-6 + 1e-4 * scale) << tensors[k].name << "[" << i << "]";
  }
}

Op op_of(OpKind k, std::vector<int> in, std::vector<int64_t> shape = {}) {
  Op op;
  op.kind = k;
  op.name = std::string(kind_name(k));
  op.inputs = std::move(in);
  op.shape = std::move(shape);
  return op;
}

// x (3, 4) → Linear (3, 5) → [body] → Linear (3, 4 or classes) → loss.
Model sandwich(const std::function<int(Model&, int)>& body, OpKind loss = OpKind::MSELoss) {
  Model m;
  m.name = "sandwich";
  int v = m.add(op_of(OpKind::Input, {}, {3, 4}));
  v = m.add(op_of(OpKind::Linear, {v}, {3, 5}));
  v = body(m, v);
  v = m.add(op_of(OpKind::Linear, {v}, {3, 4}));
  m.add(op_of(loss, {v}));
  m.finalize();
  return m;
}

TEST(CpuGradients, Linear) {
  expect_gradients_match_reference(sandwich([](Model&, int v) { return v; }));
}

TEST(CpuGradients, DenseEachActivation) {
  for (Activation a : {Activation::None, Activation::ReLU, Activation::Tanh}) {
    SCOPED_TRACE(std::string(activation_name(a)));
    expect_gradients_match_reference(sandwich([a](Model& m, int v) {
      Op d = op_of(OpKind::Dense, {v}, {3, 6});
      d.act = a;
      return m.add(std::move(d));
    }));
  }
}

TEST(CpuGradients, ElementwiseActivations) {
  for (OpKind k : {OpKind::ReLU, OpKind::Tanh, OpKind::GELU}) {
    SCOPED_TRACE(std::string(kind_name(k)));
    expect_gradients_match_reference(sandwich([k](Model& m, int v) { return m.add(op_of(k, {v})); }));
  }
}

TEST(CpuGradients, LayerNorm) {
  expect_gradients_match_reference(sandwich([](Model& m, int v) { return m.add(op_of(OpKind::LayerNorm, {v})); }));
}

TEST(CpuGradients, AddResidualAndSelf) {
  expect_gradients_match_reference(sandwich([](Model& m, int v) {
    const int t = m.add(op_of(OpKind::Tanh, {v}));
    return m.add(op_of(OpKind::Add, {v, t}));
  }));
  expect_gradients_match_reference(sandwich([](Model& m, int v) { return m.add(op_of(OpKind::Add, {v, v})); }),
                                   "store-all");
}

TEST(CpuGradients, Dropout) {
  expect_gradients_match_reference(sandwich([](Model& m, int v) {
    Op d = op_of(OpKind::Dropout, {v});
    d.dropout_p = 0.4f;
    return m.add(std::move(d));
  }));
}

TEST(CpuGradients, SoftmaxCrossEntropy) {
  expect_gradients_match_reference(sandwich([](Model& m, int v) { return m.add(op_of(OpKind::Tanh, {v})); },
                                            OpKind::SoftmaxCELoss));
}

TEST(CpuGradients, LinearOnTheInputHasNoInputGradient) {
  Model m;
  m.name = "direct";
  int v = m.add(op_of(OpKind::Input, {}, {2, 3}));
  Op d = op_of(OpKind::Dense, {v}, {2, 3});
  d.act = Activation::Tanh;
  v = m.add(std::move(d));
  m.add(op_of(OpKind::MSELoss, {v}));
  m.finalize();
  expect_gradients_match_reference(m, "recompute-all");
}

ConstValues values(std::vector<float> v) { return ConstValues{std::make_shared<const std::vector<float>>(std::move(v))}; }

// Token ids → Embedding → a learned position table → ÷ a scalar → a MatMul with
// a transposed (strided) operand → · a row of constants → a causal mask with a
// finite fill → + a fixed table: every kind GPT needs, and the ones it does
// not use (DivConst, a fixed AddConst, a tensor MulConst), at the gradient
// of the table, the positions and the Linears.
Model constants_and_attention() {
  Model m;
  m.name = "attention-bits";
  Op ids = op_of(OpKind::Input, {}, {2, 3});
  ids.dtype = DType::I64;
  int x = m.add(std::move(ids));
  Op emb = op_of(OpKind::Embedding, {x}, {2, 3, 4});
  emb.attrs.edit().vocab = 7;
  x = m.add(std::move(emb));
  Op pos = op_of(OpKind::AddConst, {x});
  pos.attrs.edit().const_shape = {3, 4};
  pos.attrs.edit().learned = true;
  x = m.add(std::move(pos));
  Op div = op_of(OpKind::DivConst, {x});
  div.attrs.edit().values = values({2.5f});
  const int a = m.add(std::move(div));
  const int b = m.add(op_of(OpKind::Linear, {a}, {2, 3, 4}));
  Op tr = op_of(OpKind::Transpose, {b});
  tr.attrs.edit().perm = {0, 2, 1};
  const int bt = m.add(std::move(tr));
  x = m.add(op_of(OpKind::MatMul, {a, bt}));
  Op mul = op_of(OpKind::MulConst, {x});
  mul.attrs.edit().const_shape = {3};
  mul.attrs.edit().values = values({0.5f, -1.0f, 2.0f});
  x = m.add(std::move(mul));
  Op mask = op_of(OpKind::MaskedFill, {x});
  mask.attrs.edit().const_shape = {1, 3, 3};
  mask.attrs.edit().values = causal_mask_values(3);
  mask.attrs.edit().fill = -3.0f;
  x = m.add(std::move(mask));
  Op add = op_of(OpKind::AddConst, {x});
  add.attrs.edit().const_shape = {1, 3};
  add.attrs.edit().values = values({0.1f, 0.2f, 0.3f});
  x = m.add(std::move(add));
  x = m.add(op_of(OpKind::Linear, {x}, {2, 3, 4}));
  m.add(op_of(OpKind::MSELoss, {x}));
  m.finalize();
  return m;
}

TEST(CpuGradients, EmbeddingConstantsMaskAndBatchedMatMul) {
  const Model m = constants_and_attention();
  ASSERT_EQ(parameter_tensors(m).size(), 6u);  // table, positions, two Linears' weight and bias
  expect_gradients_match_reference(m, "store-all");
  expect_gradients_match_reference(m, "recompute-all");
}

TEST(CpuGradients, WholePresets) {
  expect_gradients_match_reference(make_preset("mlp:3:6:3"));
  expect_gradients_match_reference(make_preset("chain:4:16"));
  expect_gradients_match_reference(make_preset("transformer:1:8:3:1"), "recompute-all");
}

}  // namespace
}  // namespace remat
