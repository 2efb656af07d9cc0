// Mixed precision on the CPU reference (docs/memory-model.md#mixed-precision-autocast):
// bf16/f16 results against float64 references within tolerances derived from
// the rounding, and every strategy bitwise equal to store-all in bf16/f16.
#include <cmath>
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "core/exec/cpu_mixed.h"
#include "core/io/model_source.h"
#include "core/kernels/convert.h"
#include "tests/exec/exec_test_util.h"
#include "tests/support/model_builders.h"

namespace remat {
namespace {

using testing::make_op;
using testing::quick;
using testing::schedule_of;

constexpr double kU32 = 0x1p-24;  // f32's unit roundoff

// Unit roundoff of a stored dtype: half an ulp at 1, relative.
double unit_roundoff(DType d) { return d == DType::BF16 ? 0x1p-8 : d == DType::F16 ? 0x1p-11 : kU32; }

float round_to(DType d, float x) {
  return d == DType::BF16 ? cpu::round_bf16(x) : d == DType::F16 ? cpu::round_f16(x) : x;
}


// Every op's forward once, in order, on the CPU backend: the data and each
// A(v) widened to f32 from its dtype.
struct Forwarded {
  HostData data;
  std::vector<std::vector<float>> act;
};
Forwarded forward_all(const Model& m, uint64_t seed) {
  CpuBackend b;
  Forwarded f{make_host_data(m, seed), {}};
  b.load(m, f.data);
  const auto n = static_cast<std::size_t>(m.size());
  std::vector<void*> act(n, nullptr), grad(n, nullptr), aux(n, nullptr);
  const std::vector<uint8_t> in = input_bytes(m, f.data);
  act[0] = b.allocate(m.op(0).bytes);
  b.upload(act[0], in.data(), in.size());
  for (int v = 1; v < m.size(); ++v) {
    act[static_cast<std::size_t>(v)] = b.allocate(m.op(v).bytes);
    if (m.op(v).aux_bytes) aux[static_cast<std::size_t>(v)] = b.allocate(m.op(v).aux_bytes);
    b.forward(m, v, TensorTable{act, grad, aux});
  }
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    std::vector<float> x(static_cast<std::size_t>(op.numel()));
    const void* p = act[static_cast<std::size_t>(v)];
    if (op.dtype == DType::BF16) cpu::bf16_to_f32(static_cast<const uint16_t*>(p), x.data(), op.numel());
    else if (op.dtype == DType::F16) cpu::f16_to_f32(static_cast<const uint16_t*>(p), x.data(), op.numel());
    else if (op.dtype == DType::F32) std::memcpy(x.data(), p, 4 * x.size());
    f.act.push_back(std::move(x));
  }
  for (void* p : act) b.release(p);
  for (void* p : aux) b.release(p);
  return f;
}

// y is what rounding a value within `delta` of `ref` to dtype d can give:
// the f32 computation lands within delta of the exact result, and the store
// rounds once.
void expect_rounded_within(DType d, float y, double ref, double delta, const std::string& where) {
  const float lo = round_to(d, static_cast<float>(ref - delta)), hi = round_to(d, static_cast<float>(ref + delta));
  EXPECT_TRUE(lo <= y && y <= hi) << where << ": " << y << " is not a rounding of " << ref << " ± " << delta << " (["
                                  << lo << ", " << hi << "])";
  EXPECT_EQ(y, round_to(d, y)) << where << ": " << y << " is not a " << dtype_name(d) << " value";
}

// x (rows, in) -> Linear (rows, out) -> MSE, the Linear in `lin`, the input in `in`.
Model linear_model(DType in, DType lin) {
  Model m;
  m.name = "linear";
  int v = m.add(make_op(OpKind::Input, {}, {6, 48}, in));
  v = m.add(make_op(OpKind::Linear, {v}, {6, 20}, lin));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  return m;
}

// Autocast's linear: x and W (and b) rounded to the op's dtype, the sum in
// f32 (within γ_{n+1}·Σ|x̂ŵ| of the exact one), the result rounded once.
void expect_linear_autocast(DType in, DType lin) {
  const Model m = linear_model(in, lin);
  const Forwarded f = forward_all(m, 3);
  const auto& W = f.data.params[0];
  const auto& b = f.data.params[1];
  const std::vector<float>& x = f.act[0];  // as stored (rounded already when `in` is low)
  const double u = unit_roundoff(lin);
  const int64_t rows = 6, n = 48, out = 20;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double cast_sum = round_to(lin, b[o]), plain = b[o], magnitude = std::fabs(b[o]);
      for (int64_t i = 0; i < n; ++i) {
        const double xi = f.data.input[r * n + i], wi = W[o * n + i];
        cast_sum += static_cast<double>(round_to(lin, x[r * n + i])) * round_to(lin, W[o * n + i]);
        plain += xi * wi;
        magnitude += std::fabs(xi * wi);
      }
      const float y = f.act[1][r * out + o];
      const std::string where = "y[" + std::to_string(r) + "," + std::to_string(o) + "]";
      // Against the exact sum of the rounded operands: only the f32 sum's error and the store's rounding.
      expect_rounded_within(lin, y, cast_sum, (n + 2) * kU32 * magnitude * (1 + 4 * u), where);
      // Against float64 at the f32 values: u·|y| for the store, 2u + u² per
      // product for the casts of x and W (and the input's own store), times Σ|x·w|.
      const double in_u = in == DType::F32 ? 0 : unit_roundoff(in);
      const double bound = u * std::fabs(plain) + (2 * u + u * u + in_u + (n + 2) * kU32) * magnitude * (1 + u);
      EXPECT_LE(std::fabs(y - plain), bound) << where;
    }
}

TEST(MixedPrecision, LinearBf16CastsItsF32InputAndWeights) { expect_linear_autocast(DType::F32, DType::BF16); }
TEST(MixedPrecision, LinearF16OnF16Input) { expect_linear_autocast(DType::F16, DType::F16); }

// A norm computes in f32 from the bf16 values it reads (gamma and beta stay
// f32 masters) and rounds its result once. The kernel's f32 error: the mean
// and rstd rounded to f32, then four f32 operations per element.
TEST(MixedPrecision, LayerNormBf16RoundsOnlyItsResult) {
  Model m;
  m.name = "layernorm";
  int v = m.add(make_op(OpKind::Input, {}, {5, 40}, DType::BF16));
  v = m.add(make_op(OpKind::LayerNorm, {v}, {}, DType::BF16));
  m.add(make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  const Forwarded f = forward_all(m, 5);
  const auto& g = f.data.params[0];
  const auto& beta = f.data.params[1];
  const int64_t rows = 5, cols = 40;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += f.act[0][r * cols + c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(f.act[0][r * cols + c] - mean, 2);
    const double rstd = 1 / std::sqrt(var / cols + 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      const double centred = f.act[0][r * cols + c] - mean;
      const double ref = centred * rstd * g[c] + beta[c];
      const double delta = 8 * kU32 * ((std::fabs(centred) + std::fabs(mean)) * rstd * std::fabs(g[c]) + std::fabs(beta[c]));
      expect_rounded_within(DType::BF16, f.act[1][r * cols + c], ref, delta, "y[" + std::to_string(r) + "," + std::to_string(c) + "]");
    }
  }
}

// The input batch is stored in the input's dtype: the f32 values rounded to nearest even.
TEST(MixedPrecision, InputBatchIsRoundedToItsDtype) {
  const Model m = linear_model(DType::F16, DType::F16);
  const Forwarded f = forward_all(m, 3);
  for (std::size_t i = 0; i < f.data.input.size(); ++i) ASSERT_EQ(f.act[0][i], cpu::round_f16(f.data.input[i])) << i;
  EXPECT_NE(f.act[0], f.data.input);  // [-1, 1) with 24 random bits: most values are not halves
}

// Every strategy gives store-all's loss and gradients bit for bit, in the
// dtype the model stores, and those differ from the f32 model's.
void expect_strategies_bitwise(const std::string& spec, const std::string& f32_spec, bool near_f32 = true) {
  const Model m = make_preset(spec);
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(ref.ok()) << ref.message;
  // optimal at 90% of store-all's peak, its search cut at a second: whichever
  // schedule it returns recomputes, and must still match.
  const uint64_t high = simulate(m, schedule_of(m, "store-all")).peak_bytes;
  const auto forwards = [](const Schedule& s) {
    return std::count_if(s.code.begin(), s.code.end(), [](const Instr& i) { return i.kind == InstrKind::Fwd; });
  };
  for (const std::string& s : std::vector<std::string>{"recompute-all", "sqrt", "optimal:" + std::to_string(high * 9 / 10) + ":1"}) {
    const Schedule sched = schedule_of(m, s);
    EXPECT_GT(forwards(sched), m.size() - 1) << spec << " " << s << " recomputes nothing";
    const ExecResult r = execute(m, sched, cpu, quick());
    ASSERT_TRUE(r.ok()) << spec << " " << s << ": " << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, sched).peak_bytes) << spec << " " << s;
    EXPECT_EQ(std::memcmp(&r.loss, &ref.loss, 4), 0) << spec << " " << s;
    ASSERT_EQ(r.param_grads.size(), ref.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k)
      ASSERT_EQ(std::memcmp(r.param_grads[k].data(), ref.param_grads[k].data(), 4 * r.param_grads[k].size()), 0)
          << spec << " " << s << ": parameter " << k;
  }
  const Model f32 = make_preset(f32_spec);
  const ExecResult full = execute(f32, schedule_of(f32, "store-all"), cpu, quick());
  ASSERT_TRUE(full.ok()) << full.message;
  EXPECT_NE(full.grad_hash, ref.grad_hash) << spec << " ran as f32";
  // Close to f32's, as a bf16 step is: the loss within a few units of the low precision.
  if (near_f32) {
    EXPECT_NEAR(ref.loss, full.loss, 16 * unit_roundoff(m.op(m.size() - 2).dtype) * std::fabs(full.loss)) << spec;
  }
}

TEST(MixedPrecision, GptBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("gpt:2:32:4:8:2:bf16:64", "gpt:2:32:4:8:2:f32:64");
}
TEST(MixedPrecision, GptF16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("gpt:1:32:4:8:2:f16:64", "gpt:1:32:4:8:2:f32:64");
}
TEST(MixedPrecision, ResnetF16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("resnet:10:4:32:2:5:f16", "resnet:10:4:32:2:5:f32");
}
TEST(MixedPrecision, ResnetBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("resnet:10:4:32:2:5:bf16", "resnet:10:4:32:2:5:f32");
}
// Under autocast's dtype policies (core/model/autocast.h): f32 streams, f32
// softmax on CUDA, and the casts autocast saves (bf16 copies of f32 inputs in
// aux, read by the backward in the input's place: store-all has freed the
// LayerNorms' outputs by then). The tracked peak is the simulator's.
// (The ResNets are 8 wide: at 4, conv1 with its f32 image and its cast alone
// is store-all's peak, and optimal at 90% of it has no schedule.)
TEST(MixedPrecision, GptAutocastCudaBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("gpt:2:32:4:8:2:bf16@cuda:64", "gpt:2:32:4:8:2:f32:64");
}
TEST(MixedPrecision, GptAutocastCpuBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("gpt:2:32:4:8:2:bf16@cpu:64", "gpt:2:32:4:8:2:f32:64");
}
TEST(MixedPrecision, GptAutocastCudaF16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("gpt:1:32:4:8:2:f16@cuda:64", "gpt:1:32:4:8:2:f32:64");
}
TEST(MixedPrecision, ResnetAutocastCpuBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("resnet:10:8:32:2:5:bf16@cpu", "resnet:10:8:32:2:5:f32");
}
TEST(MixedPrecision, ResnetAutocastCudaBf16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("resnet:10:8:32:2:5:bf16@cuda", "resnet:10:8:32:2:5:f32");
}
// In f16 this ResNet's loss is 17 f16 units (0.86 %) from f32's, past the
// helper's rough 16: only the strategies' bitwise equality is checked here.
TEST(MixedPrecision, ResnetAutocastCudaF16EveryStrategyBitwiseEqual) {
  expect_strategies_bitwise("resnet:10:8:32:2:5:f16@cuda", "resnet:10:8:32:2:5:f32", false);
}

// Autocast's weight gradient is its bf16 copy's: every element of a bf16
// Linear's weight gradient is a bf16 value (added to zero masters), while a
// LayerNorm's (f32 compute) is not rounded.
TEST(MixedPrecision, WeightGradientsOfLoweredOpsAreRoundedToTheirDtype) {
  const Model m = make_preset("gpt:1:32:4:8:2:bf16:64");
  CpuBackend cpu;
  const ExecResult r = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  const auto tensors = parameter_tensors(m);
  int lowered = 0, unrounded = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const bool lowers = autocast_lowers(m.op(tensors[k].op).kind);
    for (const float g : r.param_grads[k]) {
      if (lowers) ASSERT_EQ(g, cpu::round_bf16(g)) << tensors[k].name;
      else unrounded += g != cpu::round_bf16(g);
    }
    lowered += lowers;
  }
  EXPECT_GT(lowered, 0);
  EXPECT_GT(unrounded, 0);
}

TEST(MixedPrecision, PureF32OpsDoNotRunMixed) {
  const Model f32 = make_preset("gpt:1:32:4:8:2:f32:64");
  for (int v = 0; v < f32.size(); ++v) EXPECT_FALSE(runs_mixed(f32, v)) << v;
  const Model bf16 = make_preset("gpt:1:32:4:8:2:bf16:64");
  for (int v = 1; v < bf16.size(); ++v) EXPECT_TRUE(runs_mixed(bf16, v)) << v;
}

// A view computes nothing forward, so its forward takes no mixed call (no
// scratch, no widening of its storage: on CUDA a kernel and an allocation
// each), while every other forward and every backward of an op runs_mixed
// holds does, two runs (the warm-up and one timed) of sqrt's schedule, with
// store-all's bits. A captured bf16 Llama: its head reshapes, transposes,
// slices and expands are views of bf16 storages.
TEST(MixedPrecision, AViewsForwardTakesNoMixedCall) {
  const Model m = load_model(REMAT_EXEC_TEST_MODELS "/llama_bf16_small.json");
  const Schedule s = schedule_of(m, "sqrt");
  uint64_t calls = 0;
  int view_fwds = 0;
  for (const Instr& ins : s.code) {
    if (ins.kind == InstrKind::Fwd && m.op(ins.op).view) view_fwds += runs_mixed(m, ins.op);
    else if (ins.kind == InstrKind::Fwd || ins.kind == InstrKind::Bwd) calls += runs_mixed(m, ins.op);
  }
  EXPECT_GE(view_fwds, 50);  // of sqrt's 2 blocks' forwards and recomputations
  CpuBackend cpu;
  const ExecResult r = execute(m, s, cpu, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(cpu.mixed_calls(), 2 * calls);
  const ExecResult all = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(all.ok()) << all.message;
  EXPECT_EQ(r.grad_hash, all.grad_hash);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// ‖a − b‖₂ / ‖b‖₂, in double.
double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += std::pow(static_cast<double>(a[i]) - b[i], 2);
    n += std::pow(static_cast<double>(b[i]), 2);
  }
  return std::sqrt(d) / (n > 0 ? std::sqrt(n) : 1.0);
}

// An f16 model runs with GradScaler's scale: 2^16, halved in the warm-up
// while gradients overflow (resnet's batch norms do at 2^16), the gradients
// returned unscaled: near the f32 model's, not 2^k times them.
TEST(MixedPrecision, F16LossScaleBacksOffUntilGradientsAreFinite) {
  const Model m = make_preset("resnet:10:4:32:2:5:f16");
  CpuBackend cpu;
  const ExecResult r = execute(m, testing::schedule_of(m, "sqrt"), cpu, testing::quick());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_GE(r.loss_scale_backoffs, 1);
  EXPECT_EQ(r.loss_scale, std::ldexp(65536.0f, -r.loss_scale_backoffs));
  EXPECT_FALSE(r.step_skipped);
  const Model f32 = make_preset("resnet:10:4:32:2:5:f32");
  const ExecResult full = execute(f32, testing::schedule_of(f32, "sqrt"), cpu, testing::quick());
  ASSERT_TRUE(full.ok()) << full.message;
  EXPECT_EQ(full.loss_scale, 1.0f);
  EXPECT_EQ(full.loss_scale_backoffs, 0);
  const auto tensors = parameter_tensors(m);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    for (const float g : r.param_grads[k]) ASSERT_TRUE(std::isfinite(g)) << tensors[k].name;
    // Unscaled by the right power of two: a factor 2^k (k != 0) left in would be
    // an error of at least 1/2. (f16 on 2 images per batch norm is itself
    // some 20% off f32 here: the norms amplify the rounding.)
    EXPECT_LT(relative_l2(r.param_grads[k], full.param_grads[k]), 0.5) << tensors[k].name;
  }
}

// bf16 has f32's range: no loss scale.
TEST(MixedPrecision, Bf16RunsWithoutLossScale) {
  const Model m = make_preset("gpt:1:32:4:8:2:bf16:64");
  CpuBackend cpu;
  const ExecResult r = execute(m, testing::schedule_of(m, "store-all"), cpu, testing::quick());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.loss_scale, 1.0f);
  EXPECT_EQ(r.loss_scale_backoffs, 0);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Autocast runs losses in f32: on a bf16/f16 input they keep the f32 cast
// (MSE) or log-probabilities (cross-entropy) in aux, 4 bytes an element, and
// not the input; on f32 they keep the input.
TEST(MixedPrecision, LossesOfLowPrecisionInputsKeepF32) {
  const Model bf16 = make_preset("gpt:1:32:4:8:2:bf16:64");
  const Op& ce = bf16.op(bf16.loss());
  EXPECT_TRUE(ce.saved.empty());
  EXPECT_EQ(ce.aux_bytes, 4 * static_cast<uint64_t>(bf16.op(ce.inputs[0]).numel()));
  EXPECT_TRUE(ce_keeps_log_probs(ce));
  const Model f32 = make_preset("gpt:1:32:4:8:2:f32:64");
  EXPECT_EQ(f32.op(f32.loss()).saved, std::vector<int>{f32.op(f32.loss()).inputs[0]});
  EXPECT_EQ(f32.op(f32.loss()).aux_bytes, 0u);
  const Model mse = linear_model(DType::F16, DType::F16);
  EXPECT_TRUE(target_loss_keeps_f32_input(mse.op(mse.loss())));
  EXPECT_EQ(mse.op(mse.loss()).aux_bytes, 4u * 6 * 20);
  EXPECT_FALSE(target_loss_keeps_f32_input(linear_model(DType::F32, DType::F32).op(2)));
}

// BCEWithLogitsLoss on a bf16 head (a mask or multi-label head under
// autocast) keeps the f32 cast of its logits in aux, as MSE does and as
// PyTorch's node does (its saved self is f32), and every strategy gives
// store-all's loss and gradients bit for bit with the predicted peak.
TEST(MixedPrecision, BceWithLogitsOfABf16HeadKeepsItsF32CastAndRunsBitwise) {
  Model m;
  m.name = "bce_bf16";
  int v = m.add(make_op(OpKind::Input, {}, {6, 48}, DType::F32));
  v = m.add(make_op(OpKind::Linear, {v}, {6, 32}, DType::BF16));
  v = m.add(make_op(OpKind::GELU, {v}, {6, 32}, DType::BF16));
  v = m.add(make_op(OpKind::Linear, {v}, {6, 5}, DType::BF16));
  m.add(make_op(OpKind::BCEWithLogitsLoss, {v}, {}, DType::F32));
  m.finalize();
  const Op& bce = m.op(m.loss());
  EXPECT_TRUE(bce.saved.empty());
  EXPECT_EQ(bce.aux_bytes, 4u * 6 * 5);
  EXPECT_TRUE(target_loss_keeps_f32_input(bce));
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(ref.ok()) << ref.message;
  EXPECT_TRUE(std::isfinite(ref.loss));
  for (const char* spec : {"recompute-all", "sqrt", "every-k:2"}) {
    const Schedule s = schedule_of(m, spec);
    const ExecResult r = execute(m, s, cpu, quick());
    ASSERT_TRUE(r.ok()) << spec << ": " << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, s).peak_bytes) << spec;
    EXPECT_EQ(std::memcmp(&r.loss, &ref.loss, 4), 0) << spec;
    ASSERT_EQ(r.param_grads.size(), ref.param_grads.size());
    for (std::size_t k = 0; k < r.param_grads.size(); ++k)
      EXPECT_EQ(std::memcmp(r.param_grads[k].data(), ref.param_grads[k].data(), 4 * r.param_grads[k].size()), 0)
          << spec << ": parameter " << k;
  }
}

}  // namespace
}  // namespace remat
