// Which products run on tensor cores (core/exec/gemm_path.h): the switch
// REMAT_CUDA_GEMM and the per-op decision, a pure function of the model that
// the CUDA backend follows (checked here, where no GPU is needed).
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/gemm_path.h"
#include "tests/support/model_builders.h"
#include "tests/exec/env_switch_check.h"
#include "core/model/presets.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

TEST(GemmPath, ParsesTheTwoPaths) {
  GemmMode m = GemmMode::F32;
  EXPECT_TRUE(parse_gemm_mode("tensor", m));
  EXPECT_EQ(m, GemmMode::TensorCore);
  EXPECT_TRUE(parse_gemm_mode("f32", m));
  EXPECT_EQ(m, GemmMode::F32);
  for (const char* bad : {"", "F32", "tf32", "tensor-core", "bf16"}) {
    m = GemmMode::TensorCore;
    EXPECT_FALSE(parse_gemm_mode(bad, m)) << bad;
    EXPECT_EQ(m, GemmMode::TensorCore) << bad;  // untouched
  }
  EXPECT_EQ(gemm_mode_name(GemmMode::TensorCore), "tensor");
  EXPECT_EQ(gemm_mode_name(GemmMode::F32), "f32");
}

// The environment variable decides; unset or empty is the default, tensor cores.
TEST(GemmPath, EnvironmentChoosesAndNamesABadValue) {
  testing::expect_env_switch("REMAT_CUDA_GEMM", [] { return gemm_mode_from_env(); }, GemmMode::TensorCore, {{"f32", GemmMode::F32}, {"tensor", GemmMode::TensorCore}}, "fast",
                             "REMAT_CUDA_GEMM: 'fast' is not a GEMM path");
}

// A GPT's Linears (qkv, attention projection, the MLP's two, the head: 4 per
// block + 1) and its attention MatMuls (q·kᵀ, weights·v: 2 per block) take
// tensor cores forward and backward, in every op's dtype and under CUDA
// autocast (where the Linears after an f32 LayerNorm read its bf16 cast, and
// weights·v the cast of the f32 softmax's); nothing else does, and nothing
// at all on the f32 path or in f32.
TEST(GemmPath, AGptsLinearsAndMatMulsAndNothingElse) {
  for (const char* spec : {"gpt:2:32:4:16:2:bf16:64", "gpt:2:32:4:16:2:bf16@cuda:64", "gpt:1:32:4:16:2:f16@cuda:64",
                           "gpt:2:32:4:16:2:f16:64"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    int linears = 0, lowp = 0;
    for (int v = 0; v < m.size(); ++v) {
      const bool want = m.op(v).kind == OpKind::Linear || m.op(v).kind == OpKind::MatMul;
      linears += want;
      EXPECT_EQ(lowp_gemm(m, v, false, GemmMode::TensorCore), want) << m.op(v).name;
      EXPECT_EQ(lowp_gemm(m, v, true, GemmMode::TensorCore), want) << m.op(v).name;
      EXPECT_FALSE(lowp_gemm(m, v, false, GemmMode::F32)) << m.op(v).name;
      EXPECT_FALSE(lowp_gemm(m, v, true, GemmMode::F32)) << m.op(v).name;
      lowp += lowp_gemm(m, v, false, GemmMode::TensorCore);
    }
    const int blocks = spec[4] - '0';
    EXPECT_EQ(linears, 4 * blocks + 1 + 2 * blocks);
    EXPECT_EQ(lowp, linears);
  }
  const Model f32 = make_preset("gpt:2:32:4:16:2:f32:64");
  for (int v = 0; v < f32.size(); ++v) EXPECT_FALSE(lowp_gemm(f32, v, false, GemmMode::TensorCore)) << f32.op(v).name;
}

// Which operands the mixed call leaves unwidened for a 16-bit product: a
// Linear's input; in a GPT's attention, q and kᵀ (strided views, copied to
// aux from their widening) are widened in the forward, the attention weights
// (read in place) are not, v (copied) is; in the backward none of them.
TEST(GemmPath, OperandsReadIn16BitsOnly) {
  const Model m = make_preset("gpt:1:32:4:16:2:bf16:64");
  int qk = -1, av = -1, fc = -1;
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).name == "h0.attn.q@kT") qk = v;
    if (m.op(v).name == "h0.attn.@v") av = v;
    if (m.op(v).name == "h0.mlp.c_fc") fc = v;
  }
  ASSERT_GE(qk, 0);
  ASSERT_GE(av, 0);
  ASSERT_GE(fc, 0);
  for (const bool backward : {false, true}) {
    EXPECT_TRUE(gemm_reads_16_bits_only(m, fc, 0, backward));
    EXPECT_EQ(gemm_reads_16_bits_only(m, qk, 0, backward), backward);
    EXPECT_EQ(gemm_reads_16_bits_only(m, qk, 1, backward), backward);
    EXPECT_TRUE(gemm_reads_16_bits_only(m, av, 0, backward));
    EXPECT_EQ(gemm_reads_16_bits_only(m, av, 1, backward), backward);
  }
  EXPECT_FALSE(gemm_reads_16_bits_only(m, fc, 1, false));  // no second input
}

// What `remat run` reports: a GPT's lowered ops are its Linears and its two
// attention MatMuls per block, all on tensor cores; a ResNet's, its classifier.
TEST(GemmPath, CountsForTheRunReport) {
  const Model m = make_preset("gpt:2:32:4:16:2:bf16@cuda:64");
  const GemmPathCount tc = count_gemm_paths(m, GemmMode::TensorCore);
  EXPECT_EQ(tc.lowered, 9 + 2 * 2);
  EXPECT_EQ(tc.tensor_core, 13);
  const GemmPathCount f32 = count_gemm_paths(m, GemmMode::F32);
  EXPECT_EQ(f32.lowered, 13);
  EXPECT_EQ(f32.tensor_core, 0);
  const GemmPathCount none = count_gemm_paths(make_preset("gpt:2:32:4:16:2:f32:64"), GemmMode::TensorCore);
  EXPECT_EQ(none.lowered, 0);
  EXPECT_EQ(none.tensor_core, 0);
  // A ResNet's products are its classifier alone: its 12 convolutions are the
  // convolution report's (count_conv_paths), not GEMMs left in f32.
  const Model resnet = make_preset("resnet:10:4:32:2:5:bf16@cuda");
  const GemmPathCount r = count_gemm_paths(resnet, GemmMode::TensorCore);
  EXPECT_EQ(r.lowered, 1);
  EXPECT_EQ(r.tensor_core, 1);
  EXPECT_EQ(count_conv_paths(resnet, GemmMode::TensorCore).lowered, 12);
}

// A ResNet's one Linear (the classifier) does; its convolutions stay on cuDNN's f32 path.
TEST(GemmPath, AResNetsClassifier) {
  const Model m = make_preset("resnet:10:8:32:2:5:bf16@cuda");
  int lowp = 0;
  for (int v = 0; v < m.size(); ++v) {
    lowp += lowp_gemm(m, v, false, GemmMode::TensorCore);
    if (m.op(v).kind == OpKind::Conv) {
      EXPECT_FALSE(lowp_gemm(m, v, false, GemmMode::TensorCore));
    }
  }
  EXPECT_EQ(lowp, 1);
}

// A Dense: forward always; backward only without an activation (with one,
// the pre-activation gradient is an f32 value, not a 16-bit one).
TEST(GemmPath, DenseBackwardOnlyWithoutActivation) {
  Model m;
  m.name = "dense";
  int v = m.add(testing::make_op(OpKind::Input, {}, {6, 16}, DType::BF16));
  Op plain = testing::make_op(OpKind::Dense, {v}, {6, 16}, DType::BF16);
  const int d0 = v = m.add(plain);
  Op relu = testing::make_op(OpKind::Dense, {v}, {6, 16}, DType::BF16);
  relu.act = Activation::ReLU;
  const int d1 = v = m.add(relu);
  Op f32 = testing::make_op(OpKind::Dense, {v}, {6, 16}, DType::F32);
  const int d2 = v = m.add(f32);
  m.add(testing::make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  EXPECT_TRUE(lowp_gemm(m, d0, false, GemmMode::TensorCore));
  EXPECT_TRUE(lowp_gemm(m, d0, true, GemmMode::TensorCore));
  EXPECT_TRUE(lowp_gemm(m, d1, false, GemmMode::TensorCore));
  EXPECT_FALSE(lowp_gemm(m, d1, true, GemmMode::TensorCore));
  EXPECT_FALSE(lowp_gemm(m, d2, false, GemmMode::TensorCore));
  EXPECT_FALSE(lowp_gemm(m, 0, false, GemmMode::TensorCore));  // the input
}

// A Linear reading a transposed view copies it dense first (op_exec.h's
// dense_copy): that copy is f32, so the products stay f32.
TEST(GemmPath, StridedInputStaysF32) {
  Model m;
  m.name = "strided";
  int v = m.add(testing::make_op(OpKind::Input, {}, {16, 6}, DType::BF16));
  Op t = testing::make_op(OpKind::Transpose, {v}, {6, 16}, DType::BF16);
  t.attrs.edit().perm = {1, 0};
  v = m.add(t);
  const int lin = v = m.add(testing::make_op(OpKind::Linear, {v}, {6, 8}, DType::BF16));
  m.add(testing::make_op(OpKind::MSELoss, {v}, {}, DType::F32));
  m.finalize();
  ASSERT_TRUE(m.op(1).view);
  EXPECT_FALSE(lowp_gemm(m, lin, false, GemmMode::TensorCore));
  EXPECT_FALSE(lowp_gemm(m, lin, true, GemmMode::TensorCore));
}

// The plumbing of the 16-bit operands (core/exec/mixed_call.h's
// lowp_operands: x from its storage or autocast's cast in aux, the weight
// narrowed in its scratch, G(v) as stored), checked on the CPU: with
// set_gemm_mode(TensorCore) the f32 kernels read x and W widened from exactly
// the codes the CUDA backend hands its tensor cores, and G(v)'s codes are
// checked against the G they read. Wrong operands would change the loss or a
// gradient; right ones give the f32 path's bits, under every strategy, with
// the same tracked peak. (The tensor cores' own sums are checked on the GPU:
// tests/gpu/test_gpu_gemm_lowp.cpp.)
void expect_same_bits_with_the_16_bit_operands(const Model& m) {
  // One step calls each lowp op's forward and backward at least once (the
  // warm-up and recomputation: more).
  uint64_t per_step = 0;
  for (int v = 0; v < m.size(); ++v)
    per_step += lowp_gemm(m, v, false, GemmMode::TensorCore) + lowp_gemm(m, v, true, GemmMode::TensorCore);
  ASSERT_GT(per_step, 0u);
  CpuBackend plain, checked;
  checked.set_gemm_mode(GemmMode::TensorCore);
  for (const char* st : {"store-all", "sqrt", "recompute-all"}) {
    SCOPED_TRACE(st);
    const Schedule s = testing::schedule_of(m, st);
    const uint64_t before = checked.lowp_gemm_calls();
    const ExecResult a = execute(m, s, plain, testing::quick());
    const ExecResult b = execute(m, s, checked, testing::quick());
    ASSERT_TRUE(a.ok()) << a.message;
    ASSERT_TRUE(b.ok()) << b.message;
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
    EXPECT_EQ(a.param_grads, b.param_grads);
    EXPECT_EQ(a.tracked_peak_bytes, b.tracked_peak_bytes);
    EXPECT_GE(checked.lowp_gemm_calls() - before, per_step);
  }
  EXPECT_EQ(plain.lowp_gemm_calls(), 0u);
}

TEST(GemmPath, SixteenBitOperandsOfPresetsGiveTheF32PathsBitsOnTheCpu) {
  for (const char* spec : {"gpt:2:32:4:16:2:bf16:64", "gpt:2:32:4:16:2:bf16@cuda:64", "gpt:1:32:4:16:2:f16@cuda:64",
                           "resnet:10:4:32:2:5:bf16@cuda"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    expect_same_bits_with_the_16_bit_operands(m);
  }
}

// By hand: a Linear on an f32 input (its cast in aux), one without bias on a
// bf16 one (its storage), a Dense without and with an activation (backward in
// f32), in f16 too.
TEST(GemmPath, SixteenBitOperandsOfLinearsAndDensesGiveTheF32PathsBitsOnTheCpu) {
  for (const DType low : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(low)));
    Model m;
    m.name = "linears";
    int v = m.add(testing::make_op(OpKind::Input, {}, {6, 24}, DType::F32));
    v = m.add(testing::make_op(OpKind::Linear, {v}, {6, 20}, low));
    Op nobias = testing::make_op(OpKind::Linear, {v}, {6, 12}, low);
    nobias.attrs.edit().bias = false;
    v = m.add(nobias);
    v = m.add(testing::make_op(OpKind::Dense, {v}, {6, 16}, low));
    Op relu = testing::make_op(OpKind::Dense, {v}, {6, 8}, low);
    relu.act = Activation::ReLU;
    v = m.add(relu);
    m.add(testing::make_op(OpKind::MSELoss, {v}, {}, DType::F32));
    m.finalize();
    ASSERT_EQ(count_gemm_paths(m, GemmMode::TensorCore).tensor_core, 4);
    expect_same_bits_with_the_16_bit_operands(m);
  }
}

}  // namespace
}  // namespace remat
