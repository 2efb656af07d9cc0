// CPU backend gradients against a float64 reference: a double-precision
// replica of each op's forward, differentiated by central differences, at the
// very float32 parameter values the executor used. One small model per op kind,
// plus whole presets.
#include <cmath>

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
  A[0].assign(d.input.begin(), d.input.end());
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

TEST(CpuGradients, WholePresets) {
  expect_gradients_match_reference(make_preset("mlp:3:6:3"));
  expect_gradients_match_reference(make_preset("chain:4:16"));
  expect_gradients_match_reference(make_preset("transformer:1:8:3:1"), "recompute-all");
}

}  // namespace
}  // namespace remat
