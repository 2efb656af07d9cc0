// Norms trained in pure bf16/f16 (model.to(torch.bfloat16)) as captured on
// the CPU: aux(v) holds the LayerNorm's or GroupNorm's mean and rstd in the
// op's dtype (norm_stats_in_dtype), as PyTorch's CPU kernels keep them. The
// statistics are computed in f32, the output from those, the statistics
// saved rounded, the backward from the rounded ones
// (docs/memory-model.md#mixed-precision-autocast). Values against float64
// within tolerances derived from the rounding; every strategy bitwise equal
// to store-all with the predicted peak.
#include <cmath>
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "core/kernels/convert.h"
#include "core/model/op_rules.h"
#include "tests/exec/exec_test_util.h"
#include "tests/support/model_builders.h"

namespace remat {
namespace {

using testing::make_op;
using testing::quick;
using testing::schedule_of;

constexpr double kU32 = 0x1p-24;  // f32's unit roundoff

float round_to(DType d, float x) { return d == DType::BF16 ? cpu::round_bf16(x) : cpu::round_f16(x); }
float widen(DType d, uint16_t h) { return d == DType::BF16 ? cpu::bf16_value(h) : cpu::f16_value(h); }
uint16_t narrow(DType d, float x) { return d == DType::BF16 ? cpu::bf16_bits(x) : cpu::f16_bits(x); }

// A norm as a CPU capture of a 16-bit model records it: 2 × count statistics
// of 2 bytes each in aux.
Op norm16(Op op, int64_t count) {
  op.aux_bytes = 4 * static_cast<uint64_t>(count);
  return op;
}
Op group_norm(int in, std::vector<int64_t> shape, int64_t groups, DType d) {
  Op op = make_op(OpKind::GroupNorm, {in}, shape, d);
  op.attrs.edit().groups = groups;
  return norm16(op, shape[0] * groups);
}

// x (8, 6, 40) -> [LayerNorm -> Linear -> GELU -> Linear -> + x] × blocks -> LayerNorm -> Linear -> MSE.
Model layernorm_model(DType d, int blocks) {
  Model m;
  m.name = "pure-16-bit layernorm";
  const std::vector<int64_t> s{8, 6, 40};
  int x = m.add(make_op(OpKind::Input, {}, s, d));
  for (int b = 0; b < blocks; ++b) {
    int v = m.add(norm16(make_op(OpKind::LayerNorm, {x}, {}, d), 48));
    v = m.add(make_op(OpKind::Linear, {v}, {8, 6, 64}, d));
    v = m.add(make_op(OpKind::GELU, {v}, {}, d));
    v = m.add(make_op(OpKind::Linear, {v}, s, d));
    x = m.add(make_op(OpKind::Add, {x, v}, {}, d));
  }
  int v = m.add(norm16(make_op(OpKind::LayerNorm, {x}, {}, d), 48));
  v = m.add(make_op(OpKind::Linear, {v}, {8, 6, 10}, d));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  return m;
}

// x (4, 8, 6, 6) -> [GroupNorm(4) -> ReLU -> + x] × blocks -> GlobalAvgPool -> MSE.
Model groupnorm_model(DType d, int blocks) {
  Model m;
  m.name = "pure-16-bit groupnorm";
  const std::vector<int64_t> s{4, 8, 6, 6};
  int x = m.add(make_op(OpKind::Input, {}, s, d));
  for (int b = 0; b < blocks; ++b) {
    int v = m.add(group_norm(x, s, 4, d));
    v = m.add(make_op(OpKind::ReLU, {v}, {}, d));
    x = m.add(make_op(OpKind::Add, {x, v}, {}, d));
  }
  const int v = m.add(make_op(OpKind::GlobalAvgPool, {x}, {4, 8, 1, 1}, d));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  return m;
}

TEST(NormStats16Bit, CapturedNormsAreExecutable) {
  for (const DType d : {DType::BF16, DType::F16}) {
    for (const Model& m : {layernorm_model(d, 1), groupnorm_model(d, 1)})
      for (int v = 0; v < m.size(); ++v) {
        const Op& op = m.op(v);
        if (norm_stat_count(op) == 0) continue;
        EXPECT_TRUE(norm_stats_in_dtype(op)) << m.name << " op " << v;
        EXPECT_EQ(exec_problem(op), "") << m.name << " op " << v;
      }
  }
  // An affine InstanceNorm (PyTorch's BatchNorm of one sample) also keeps its
  // repeated weight in aux: 6 bytes a channel, the statistics at the start.
  {
    Model bn;
    const int x = bn.add(make_op(OpKind::Input, {}, {1, 8, 4, 4}, DType::BF16));
    Op op = make_op(OpKind::BatchNorm, {x}, {}, DType::BF16);
    op.aux_bytes = 6 * 8;
    bn.add(op);
    bn.add(make_op(OpKind::MSELoss, {1}, {}, DType::F32));
    bn.finalize();
    EXPECT_TRUE(norm_stats_in_dtype(bn.op(1)));
    EXPECT_EQ(exec_problem(bn.op(1)), "");
    Op f32 = bn.op(1);
    f32.dtype = DType::F32;  // f32 statistics need 8 bytes a channel
    f32.bytes *= 2;
    EXPECT_EQ(exec_problem(f32), "it keeps no batch mean and inverse std per channel (aux)");
  }
  // Fewer than the dtype's 4 bytes a statistic pair: no room for what the kernels keep.
  Model m;
  int v = m.add(make_op(OpKind::Input, {}, {3, 16}, DType::BF16));
  Op odd = make_op(OpKind::LayerNorm, {v}, {}, DType::BF16);
  odd.aux_bytes = 4 * 3 - 2;
  v = m.add(odd);
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  EXPECT_FALSE(norm_stats_in_dtype(m.op(1)));
  EXPECT_EQ(exec_problem(m.op(1)), "it keeps no mean and rstd per row (aux)");
}

// Every strategy: store-all's loss and gradients bit for bit, the tracked
// peak the simulator's (which sizes aux at the dtype's 2 bytes a statistic).
void expect_strategies_bitwise(const Model& m) {
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(ref.ok()) << ref.message;
  EXPECT_EQ(ref.tracked_peak_bytes, simulate(m, schedule_of(m, "store-all")).peak_bytes);
  const auto forwards = [](const Schedule& s) {
    return std::count_if(s.code.begin(), s.code.end(), [](const Instr& i) { return i.kind == InstrKind::Fwd; });
  };
  for (const std::string s : {"sqrt", "recompute-all"}) {
    const Schedule sched = schedule_of(m, s);
    EXPECT_GT(forwards(sched), m.size() - 1) << m.name << " " << s << " recomputes nothing";
    const ExecResult r = execute(m, sched, cpu, quick());
    ASSERT_TRUE(r.ok()) << m.name << " " << s << ": " << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, sched).peak_bytes) << m.name << " " << s;
    EXPECT_EQ(std::memcmp(&r.loss, &ref.loss, 4), 0) << m.name << " " << s;
    ASSERT_EQ(r.param_grads.size(), ref.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k)
      ASSERT_EQ(std::memcmp(r.param_grads[k].data(), ref.param_grads[k].data(), 4 * r.param_grads[k].size()), 0)
          << m.name << " " << s << ": parameter " << k;
  }
}

TEST(NormStats16Bit, LayerNormBf16EveryStrategyBitwiseEqual) { expect_strategies_bitwise(layernorm_model(DType::BF16, 3)); }
TEST(NormStats16Bit, LayerNormF16EveryStrategyBitwiseEqual) { expect_strategies_bitwise(layernorm_model(DType::F16, 3)); }
TEST(NormStats16Bit, GroupNormBf16EveryStrategyBitwiseEqual) { expect_strategies_bitwise(groupnorm_model(DType::BF16, 4)); }
TEST(NormStats16Bit, GroupNormF16EveryStrategyBitwiseEqual) { expect_strategies_bitwise(groupnorm_model(DType::F16, 4)); }

// Captured on the CPU from PyTorch 1.13 modules in pure bf16 (the bridge's
// tests/python/test_capture_pure16.py modules; the CNN with a GroupNorm and
// a BatchNorm): their norms' aux as the capture recorded it.
const char* const kCaptured[] = {REMAT_EXEC_TEST_MODELS "/pure_bf16_layernorm.json",
                                 REMAT_EXEC_TEST_MODELS "/pure_bf16_norms_cnn.json"};

TEST(NormStats16Bit, CapturedModelsEveryStrategyBitwiseEqual) {
  for (const char* path : kCaptured) {
    SCOPED_TRACE(path);
    const Model m = load_model(path);
    int norms = 0;
    for (int v = 0; v < m.size(); ++v) norms += norm_stats_in_dtype(m.op(v));
    EXPECT_EQ(norms, std::string(path).ends_with("layernorm.json") ? 3 : 2);
    expect_strategies_bitwise(m);
  }
}

// The CUDA backend's paths, emulated on the CPU (the 16-bit GEMM operands of
// the Linears; a BatchNorm's and the ReLUs' and adds' 16-bit loads and
// stores, the statistics still widened and narrowed by the mixed call): the
// widening call's bits under every strategy, with the same tracked peak.
TEST(NormStats16Bit, CapturedModelsOnTheCudaPathsGiveTheWideningCallsBitsOnTheCpu) {
  for (const char* path : kCaptured) {
    SCOPED_TRACE(path);
    const Model m = load_model(path);
    CpuBackend plain, checked;
    checked.set_gemm_mode(GemmMode::TensorCore);
    checked.set_pointwise_mode(PointwiseMode::Direct);
    for (const char* st : {"store-all", "sqrt", "recompute-all"}) {
      SCOPED_TRACE(st);
      const Schedule s = schedule_of(m, st);
      const ExecResult a = execute(m, s, plain, quick());
      const ExecResult b = execute(m, s, checked, quick());
      ASSERT_TRUE(a.ok()) << a.message;
      ASSERT_TRUE(b.ok()) << b.message;
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
      EXPECT_EQ(a.param_grads, b.param_grads);
      EXPECT_EQ(a.tracked_peak_bytes, b.tracked_peak_bytes);
    }
    EXPECT_GT(checked.lowp_gemm_calls(), 0u);
    EXPECT_GT(checked.lowp_io_calls(), 0u);
  }
}

// One norm's forward and backward on the CPU backend, its input, G(v) and
// parameters given; what it stored read back widened.
struct NormRun {
  std::vector<float> x, dy, gamma, beta;  // x and dy: values of the dtype
  std::vector<float> y, mean, rstd, dx;   // as stored: y, dx and the statistics in the dtype
  std::vector<float> dgamma, dbeta;       // f32
};
NormRun run_norm(const Model& m, DType d, uint64_t seed) {
  CpuBackend b;
  const HostData data = make_host_data(m, seed);
  b.load(m, data);
  NormRun r;
  r.gamma = data.params.at(0);
  r.beta = data.params.at(1);
  const Op& x = m.op(0);
  const Op& norm = m.op(1);
  const int64_t n = x.numel(), count = norm_stat_count(norm);
  std::vector<uint16_t> x16(static_cast<std::size_t>(n)), dy16(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x16[i] = narrow(d, data.input[i] * 3 + 0.5f);  // off-centre rows: a mean to round
    dy16[i] = narrow(d, std::sin(static_cast<float>(i) * 0.7f));
    r.x.push_back(widen(d, x16[i]));
    r.dy.push_back(widen(d, dy16[i]));
  }
  std::vector<void*> act(3, nullptr), grad(3, nullptr), aux(3, nullptr);
  act[0] = b.allocate(x.bytes);
  act[1] = b.allocate(norm.bytes);
  aux[1] = b.allocate(norm.aux_bytes);
  grad[0] = b.allocate(x.bytes);
  grad[1] = b.allocate(norm.bytes);
  b.upload(act[0], x16.data(), x.bytes);
  b.upload(grad[1], dy16.data(), norm.bytes);
  const TensorTable t{act, grad, aux};
  b.forward(m, 1, t);
  const std::vector<uint8_t> acc{0};
  b.backward(m, 1, t, acc);
  const auto back = [&](const void* p, int64_t k) {
    std::vector<float> out;
    for (int64_t i = 0; i < k; ++i) out.push_back(widen(d, static_cast<const uint16_t*>(p)[i]));
    return out;
  };
  r.y = back(act[1], n);
  r.dx = back(grad[0], n);
  const std::vector<float> stats = back(aux[1], 2 * count);
  r.mean.assign(stats.begin(), stats.begin() + count);
  r.rstd.assign(stats.begin() + count, stats.end());
  // G(v) was given, not seeded by the loss: undo read_param_grad's unscaling (f16's loss scale, a power of two).
  r.dgamma = b.read_param_grad(0);
  r.dbeta = b.read_param_grad(1);
  for (std::vector<float>* g : {&r.dgamma, &r.dbeta})
    for (float& e : *g) e *= b.loss_scale();
  for (void* p : {act[0], act[1], aux[1], grad[0], grad[1]}) b.release(p);
  return r;
}

// y is what rounding a value within `delta` of `ref` to dtype d can give.
void expect_rounded_within(DType d, float y, double ref, double delta, const std::string& where) {
  const float lo = round_to(d, static_cast<float>(ref - delta)), hi = round_to(d, static_cast<float>(ref + delta));
  EXPECT_TRUE(lo <= y && y <= hi) << where << ": " << y << " is not a rounding of " << ref << " ± " << delta << " (["
                                  << lo << ", " << hi << "])";
}

// The norm of `groups` runs of `len` values each (a LayerNorm row, a
// GroupNorm's (sample, group)); `channel(r, i)` is element i of run r's
// affine index.
void expect_norm_values(DType d, const NormRun& r, int64_t runs, int64_t len, int64_t channels,
                        const std::function<int64_t(int64_t, int64_t)>& channel) {
  int stats_differ_from_f32 = 0;
  std::vector<double> dgamma(static_cast<std::size_t>(channels), 0), dbeta(dgamma), dmag(dgamma);
  for (int64_t g = 0; g < runs; ++g) {
    const float* x = r.x.data() + g * len;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; ++i) mean += x[i];
    mean /= static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) var += (x[i] - mean) * (x[i] - mean);
    const double rstd = 1 / std::sqrt(var / static_cast<double>(len) + 1e-5);
    const std::string at = "run " + std::to_string(g);
    // Saved: the f32 statistics (within an f32 rounding or two of the exact
    // ones) rounded to the dtype.
    expect_rounded_within(d, r.mean[g], mean, 2 * kU32 * std::fabs(mean), at + " mean");
    expect_rounded_within(d, r.rstd[g], rstd, 4 * kU32 * rstd, at + " rstd");
    stats_differ_from_f32 += r.mean[g] != static_cast<float>(mean) || r.rstd[g] != static_cast<float>(rstd);
    // The output from the f32 statistics: their f32 error and four f32
    // operations, rounded once. (From the saved, rounded ones it would be off
    // by up to the dtype's unit roundoff of |x̂|: past this bound.)
    for (int64_t i = 0; i < len; ++i) {
      const int64_t c = channel(g, i);
      const double centred = x[i] - mean;
      const double ref = centred * rstd * r.gamma[c] + r.beta[c];
      const double delta =
          8 * kU32 * ((std::fabs(centred) + std::fabs(mean)) * rstd * std::fabs(r.gamma[c]) + std::fabs(r.beta[c]));
      expect_rounded_within(d, r.y[g * len + i], ref, delta, at + " y[" + std::to_string(i) + "]");
    }
    // The backward from the saved statistics m̂, r̂ (widened):
    //   x̂ = (x − m̂)·r̂, ĝ = dy·γ, dx = r̂·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)),
    // each term within some f32 roundings (8u of the magnitudes), rounded once to the dtype.
    const double m_hat = r.mean[g], r_hat = r.rstd[g];
    double sum_g = 0, sum_gx = 0, mag_g = 0, mag_gx = 0;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t c = channel(g, i);
      const double xh = (x[i] - m_hat) * r_hat, gh = static_cast<double>(r.dy[g * len + i]) * r.gamma[c];
      sum_g += gh;
      sum_gx += gh * xh;
      mag_g += std::fabs(gh);
      mag_gx += std::fabs(gh * xh);
      dgamma[c] += r.dy[g * len + i] * xh;
      dbeta[c] += r.dy[g * len + i];
      dmag[c] += std::fabs(r.dy[g * len + i] * xh);
    }
    const double mean_g = sum_g / static_cast<double>(len), mean_gx = sum_gx / static_cast<double>(len);
    const double mag_mean_g = mag_g / static_cast<double>(len), mag_mean_gx = mag_gx / static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) {
      const int64_t c = channel(g, i);
      const double xh = (x[i] - m_hat) * r_hat, gh = static_cast<double>(r.dy[g * len + i]) * r.gamma[c];
      const double ref = r_hat * (gh - mean_g - xh * mean_gx);
      const double delta = 8 * kU32 * r_hat *
                           (std::fabs(gh) + mag_mean_g + (std::fabs(xh) + std::fabs(x[i] * r_hat)) * mag_mean_gx +
                            std::fabs(xh * mean_gx));
      expect_rounded_within(d, r.dx[g * len + i], ref, delta, at + " dx[" + std::to_string(i) + "]");
    }
  }
  // The rounding is visible: some statistic is not its f32 value.
  EXPECT_GT(stats_differ_from_f32, 0);
  // The parameter gradients stay f32 sums (f32 masters): within the f32 terms' error.
  for (int64_t c = 0; c < channels; ++c) {
    EXPECT_NEAR(r.dbeta[c], dbeta[c], 4 * kU32 * static_cast<double>(runs * len) * 1.0) << "dbeta " << c;
    EXPECT_NEAR(r.dgamma[c], dgamma[c], 8 * kU32 * static_cast<double>(runs * len) * (dmag[c] + 1e-30)) << "dgamma " << c;
  }
}

void expect_layernorm_values(DType d) {
  Model m;
  m.name = "layernorm";
  int v = m.add(make_op(OpKind::Input, {}, {5, 40}, d));
  v = m.add(norm16(make_op(OpKind::LayerNorm, {v}, {}, d), 5));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  const NormRun r = run_norm(m, d, 5);
  expect_norm_values(d, r, 5, 40, 40, [](int64_t, int64_t i) { return i; });
}
void expect_groupnorm_values(DType d) {
  Model m;
  m.name = "groupnorm";
  int v = m.add(make_op(OpKind::Input, {}, {3, 6, 4, 5}, d));
  v = m.add(group_norm(v, {3, 6, 4, 5}, 3, d));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  const NormRun r = run_norm(m, d, 9);
  // (sample, group) g holds channels (g % 3)·2 and (g % 3)·2 + 1, 20 values each.
  expect_norm_values(d, r, 9, 40, 6, [](int64_t g, int64_t i) { return (g % 3) * 2 + i / 20; });
}

TEST(NormStats16Bit, LayerNormBf16SavesRoundedStatistics) { expect_layernorm_values(DType::BF16); }
TEST(NormStats16Bit, LayerNormF16SavesRoundedStatistics) { expect_layernorm_values(DType::F16); }
TEST(NormStats16Bit, GroupNormBf16SavesRoundedStatistics) { expect_groupnorm_values(DType::BF16); }
TEST(NormStats16Bit, GroupNormF16SavesRoundedStatistics) { expect_groupnorm_values(DType::F16); }

}  // namespace
}  // namespace remat
