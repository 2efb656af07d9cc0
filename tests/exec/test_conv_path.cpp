// Which convolutions run on cuDNN's 16-bit path (core/exec/gemm_path.h's
// lowp_conv): the switch REMAT_CUDA_CONV, the per-op decision (a pure
// function of the model, so every strategy takes the same path op by op),
// and the plumbing of the 16-bit operands and results checked on the CPU
// (CpuBackend::set_conv_mode), where no GPU is needed. cuDNN's own sums are
// checked on the GPU: tests/gpu/test_gpu_conv_lowp.cpp.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/gemm_path.h"
#include "tests/support/model_builders.h"
#include "tests/exec/env_switch_check.h"
#include "core/exec/pointwise_path.h"
#include "core/model/presets.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

// The environment variable decides; unset or empty is the default, tensor cores.
TEST(ConvPath, EnvironmentChoosesAndNamesABadValue) {
  testing::expect_env_switch("REMAT_CUDA_CONV", [] { return conv_mode_from_env(); }, GemmMode::TensorCore, {{"f32", GemmMode::F32}, {"tensor", GemmMode::TensorCore}}, "tf32",
                             "REMAT_CUDA_CONV: 'tf32' is not a convolution path");
}

// A ResNet-10's convolutions (the stem, two per basic block, four blocks,
// and the three 1x1 downsampling ones: 12) take cuDNN's 16-bit path forward
// and backward, in bf16 and f16 and under CUDA autocast (where conv1 reads
// the f32 image's cast); nothing else does, nothing on the f32 path or in an
// f32 model. The classifier is lowp_gemm's, not lowp_conv's, and the one
// test lowp_call asks each switch for its own kind.
TEST(ConvPath, AResNetsConvolutionsAndNothingElse) {
  for (const char* spec : {"resnet:10:8:32:2:5:bf16", "resnet:10:8:32:2:5:bf16@cuda", "resnet:10:8:32:2:5:f16@cuda"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    int convs = 0, linear = -1;
    for (int v = 0; v < m.size(); ++v) {
      const bool conv = m.op(v).kind == OpKind::Conv;
      convs += conv;
      if (m.op(v).kind == OpKind::Linear) linear = v;
      for (const bool backward : {false, true}) {
        EXPECT_EQ(lowp_conv(m, v, backward, GemmMode::TensorCore), conv) << m.op(v).name;
        EXPECT_FALSE(lowp_conv(m, v, backward, GemmMode::F32)) << m.op(v).name;
        EXPECT_EQ(lowp_call(m, v, backward, GemmMode::F32, GemmMode::TensorCore), conv) << m.op(v).name;
        EXPECT_EQ(lowp_call(m, v, backward, GemmMode::TensorCore, GemmMode::F32), v == linear) << m.op(v).name;
      }
    }
    ASSERT_GE(linear, 0);
    EXPECT_EQ(convs, 12);
    const GemmPathCount tc = count_conv_paths(m, GemmMode::TensorCore);
    EXPECT_EQ(tc.lowered, 12);
    EXPECT_EQ(tc.tensor_core, 12);
    const GemmPathCount f32 = count_conv_paths(m, GemmMode::F32);
    EXPECT_EQ(f32.lowered, 12);
    EXPECT_EQ(f32.tensor_core, 0);
  }
  const Model f32 = make_preset("resnet:10:8:32:2:5:f32");
  EXPECT_EQ(count_conv_paths(f32, GemmMode::TensorCore).lowered, 0);
  for (int v = 0; v < f32.size(); ++v) EXPECT_FALSE(lowp_conv(f32, v, false, GemmMode::TensorCore)) << f32.op(v).name;
}

// A Conv's one input is read in 16 bits only (its f32 scratch left unwidened).
TEST(ConvPath, TheInputIsReadIn16BitsOnly) {
  const Model m = make_preset("resnet:10:8:32:2:5:bf16@cuda");
  int convs = 0;
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).kind != OpKind::Conv) continue;
    ++convs;
    for (const bool backward : {false, true}) {
      EXPECT_TRUE(gemm_reads_16_bits_only(m, v, 0, backward)) << m.op(v).name;
      EXPECT_FALSE(gemm_reads_16_bits_only(m, v, 1, backward)) << m.op(v).name;
    }
  }
  EXPECT_EQ(convs, 12);
}

// The plumbing, on the CPU: with set_conv_mode(TensorCore) each Conv's f32
// kernel reads x, W and G(v) widened from exactly the codes the CUDA backend
// hands cuDNN (the f32 copies the call took for them are NaN), and its
// results go through the 16-bit places cuDNN writes (A(v), the input's
// scratch, a staging buffer for the weight gradient). A wrong operand or
// place changes the loss or a gradient (or spreads NaN); right ones give the
// f32 path's bits, for a convolution without bias (its output rounded once,
// as the f32 path rounds it), under every strategy, with the same tracked
// peak. `gemm` also runs the GEMMs' check (both 16-bit paths at once), and
// `io` the 16-bit loads and stores' (set_pointwise_mode: all three, as a
// device runs them by default).
void expect_same_bits_with_16_bit_convolutions(const Model& m, bool gemm, bool io = false) {
  uint64_t per_step = 0;
  for (int v = 0; v < m.size(); ++v)
    per_step += lowp_conv(m, v, false, GemmMode::TensorCore) + lowp_conv(m, v, true, GemmMode::TensorCore);
  ASSERT_GT(per_step, 0u);
  CpuBackend plain, checked;
  checked.set_conv_mode(GemmMode::TensorCore);
  if (gemm) checked.set_gemm_mode(GemmMode::TensorCore);
  if (io) checked.set_pointwise_mode(PointwiseMode::Direct);
  for (const char* st : {"store-all", "sqrt", "recompute-all"}) {
    SCOPED_TRACE(st);
    const Schedule s = testing::schedule_of(m, st);
    const uint64_t before = checked.lowp_conv_calls();
    const ExecResult a = execute(m, s, plain, testing::quick());
    const ExecResult b = execute(m, s, checked, testing::quick());
    ASSERT_TRUE(a.ok()) << a.message;
    ASSERT_TRUE(b.ok()) << b.message;
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
    EXPECT_EQ(a.param_grads, b.param_grads);
    EXPECT_EQ(a.tracked_peak_bytes, b.tracked_peak_bytes);
    EXPECT_GE(checked.lowp_conv_calls() - before, per_step);
  }
  EXPECT_EQ(plain.lowp_conv_calls(), 0u);
  EXPECT_EQ(plain.lowp_gemm_calls(), 0u);
  if (!gemm) {
    EXPECT_EQ(checked.lowp_gemm_calls(), 0u);
  }
  EXPECT_EQ(checked.lowp_io_calls() > 0, io);  // the batch norms, ReLUs and adds took theirs
}

TEST(ConvPath, SixteenBitConvolutionsOfResNetsGiveTheF32PathsBitsOnTheCpu) {
  for (const char* spec : {"resnet:10:4:32:2:5:bf16@cuda", "resnet:10:4:32:2:5:f16@cuda", "resnet:10:4:32:2:5:bf16",
                           "resnet:10:4:32:2:5:f16"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    expect_same_bits_with_16_bit_convolutions(m, false);
    expect_same_bits_with_16_bit_convolutions(m, true);
    expect_same_bits_with_16_bit_convolutions(m, true, true);
  }
}

// By hand: a strided, padded, dilated convolution on an f32 input (autocast's
// cast in aux), a grouped one on its bf16/f16 output (read in place), a 1x1
// one, in both dtypes.
Model hand_built(DType low, bool bias) {
  Model m;
  m.name = "convs";
  int v = m.add(testing::make_op(OpKind::Input, {}, {2, 4, 9, 9}, DType::F32));
  Op a = testing::make_op(OpKind::Conv, {v}, {2, 6, 5, 5}, low);  // 3x3, stride 2, pads (1, 2), dilation (1, 2)
  a.attrs.edit().channels = 6;
  a.attrs.edit().kernel = {3, 3};
  a.attrs.edit().stride = {2, 2};
  a.attrs.edit().pads = {1, 2, 1, 2};
  a.attrs.edit().dilation = {1, 2};
  a.attrs.edit().bias = bias;
  v = m.add(a);
  Op g = testing::make_op(OpKind::Conv, {v}, {2, 6, 5, 5}, low);  // 3x3, 3 groups, same size
  g.attrs.edit().channels = 6;
  g.attrs.edit().kernel = {3, 3};
  g.attrs.edit().pads = {1, 1, 1, 1};
  g.attrs.edit().groups = 3;
  g.attrs.edit().bias = bias;
  v = m.add(g);
  Op one = testing::make_op(OpKind::Conv, {v}, {2, 5, 5, 5}, low);  // 1x1
  one.attrs.edit().channels = 5;
  one.attrs.edit().kernel = {1, 1};
  one.attrs.edit().bias = bias;
  v = m.add(one);
  m.add(testing::make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  return m;
}

TEST(ConvPath, SixteenBitStridedGroupedConvolutionsGiveTheF32PathsBitsOnTheCpu) {
  for (const DType low : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(low)));
    const Model m = hand_built(low, false);
    ASSERT_EQ(count_conv_paths(m, GemmMode::TensorCore).tensor_core, 3);
    expect_same_bits_with_16_bit_convolutions(m, false);
  }
}

// With a bias the 16-bit path rounds twice (cuDNN's output to the dtype, then
// the sum with the bias, as PyTorch's bf16 convolution plus its bias add
// does), the f32 path once: not the f32 path's bits, but the same ones under
// every strategy, with the same tracked peak as the f32 path.
TEST(ConvPath, WithABiasEveryStrategyGivesTheSameBits) {
  for (const DType low : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(low)));
    const Model m = hand_built(low, true);
    CpuBackend plain, checked;
    checked.set_conv_mode(GemmMode::TensorCore);
    const ExecResult ref = execute(m, testing::schedule_of(m, "store-all"), plain, testing::quick());
    const ExecResult base = execute(m, testing::schedule_of(m, "store-all"), checked, testing::quick());
    ASSERT_TRUE(ref.ok()) << ref.message;
    ASSERT_TRUE(base.ok()) << base.message;
    EXPECT_TRUE(std::isfinite(base.loss));
    EXPECT_EQ(base.tracked_peak_bytes, ref.tracked_peak_bytes);
    for (const char* st : {"sqrt", "recompute-all"}) {
      SCOPED_TRACE(st);
      const ExecResult r = execute(m, testing::schedule_of(m, st), checked, testing::quick());
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0) << r.loss << " vs " << base.loss;
      EXPECT_EQ(r.param_grads, base.param_grads);
      const ExecResult p = execute(m, testing::schedule_of(m, st), plain, testing::quick());
      ASSERT_TRUE(p.ok()) << p.message;
      EXPECT_EQ(r.tracked_peak_bytes, p.tracked_peak_bytes);
    }
  }
}

}  // namespace
}  // namespace remat
