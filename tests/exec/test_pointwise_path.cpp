// Which ops of a mixed call load and store their bf16/f16 tensors as stored
// on CUDA (core/exec/pointwise_path.h): the switch REMAT_CUDA_POINTWISE, the
// per-op decision (a pure function of the model), and the plumbing of the
// tensors handed to the kernels, checked here without a GPU.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/cpu_backend.h"
#include "core/exec/cpu_mixed.h"
#include "core/model/autocast.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"
#include "core/exec/op_exec.h"
#include "core/exec/pointwise_path.h"
#include "core/io/model_source.h"
#include "tests/support/model_builders.h"
#include "tests/exec/env_switch_check.h"
#include "core/model/presets.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

TEST(PointwisePath, ParsesTheTwoPaths) {
  PointwiseMode m = PointwiseMode::F32;
  EXPECT_TRUE(parse_pointwise_mode("16bit", m));
  EXPECT_EQ(m, PointwiseMode::Direct);
  EXPECT_TRUE(parse_pointwise_mode("f32", m));
  EXPECT_EQ(m, PointwiseMode::F32);
  for (const char* bad : {"", "F32", "bf16", "16", "direct"}) {
    m = PointwiseMode::Direct;
    EXPECT_FALSE(parse_pointwise_mode(bad, m)) << bad;
    EXPECT_EQ(m, PointwiseMode::Direct) << bad;  // untouched
  }
  EXPECT_EQ(pointwise_mode_name(PointwiseMode::Direct), "16bit");
  EXPECT_EQ(pointwise_mode_name(PointwiseMode::F32), "f32");
}

TEST(PointwisePath, EnvironmentChoosesAndNamesABadValue) {
  testing::expect_env_switch("REMAT_CUDA_POINTWISE", [] { return pointwise_mode_from_env(); }, PointwiseMode::Direct, {{"f32", PointwiseMode::F32}, {"16bit", PointwiseMode::Direct}}, "fast",
                             "REMAT_CUDA_POINTWISE: 'fast' is not a pointwise path");
}

std::set<std::string> direct_ops(const Model& m, PointwiseMode mode) {
  std::set<std::string> out;
  int widening = 0;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);  // count_pointwise_paths' own test of runs_mixed, which it restates
    widening += op.kind != OpKind::Input && !op.view &&
                (!autocast_lowers(op.kind) || op.kind == OpKind::Attention) && runs_mixed(m, v);
    const bool f = lowp_io(m, v, false, mode), b = lowp_io(m, v, true, mode);
    if (op.view) {
      EXPECT_FALSE(f) << op.name;  // a view's forward computes nothing; its backward: ViewGradients*
    } else if (!is_loss(op.kind)) {
      EXPECT_EQ(f, b) << op.name;  // a loss's backward: below
    }
    if (f) out.insert(m.op(v).name);
  }
  EXPECT_EQ(count_pointwise_paths(m, mode).widening, widening);
  return out;
}

// A GPT under CUDA autocast: the attention's scale and mask (bf16 to bf16),
// its softmax (bf16 in, f32 out: autocast's float32 list), the projections'
// dropouts (bf16), the residual adds (f32 + bf16), the GELU and the loss on
// the bf16 logits (its backward not in f16, whose loss scale multiplies that
// gradient before it is rounded); not the attention's dropout (f32 in and
// out: no widening call), the LayerNorms (f32), the products (tensor cores),
// the views or the embedding. The attention output's copy (a Reshape of a
// transposed view) reads its input through its strides, as stored.
TEST(PointwisePath, AGptUnderCudaAutocast) {
  for (const char* spec : {"gpt:2:32:4:16:2:bf16@cuda:64", "gpt:2:32:4:16:2:f16@cuda:64"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    EXPECT_TRUE(lowp_io(m, m.loss(), false, PointwiseMode::Direct));
    EXPECT_EQ(lowp_io(m, m.loss(), true, PointwiseMode::Direct), std::string(spec).find("bf16") != std::string::npos);
    std::set<std::string> want = {"loss"};
    for (const char* b : {"h0.", "h1."})
      for (const char* name : {"attn.scale", "attn.mask", "attn.softmax", "attn.y.view", "attn.resid_dropout", "res1",
                               "mlp.gelu", "mlp.dropout", "res2"})
        want.insert(std::string(b) + name);
    EXPECT_EQ(direct_ops(m, PointwiseMode::Direct), want);
    EXPECT_TRUE(direct_ops(m, PointwiseMode::F32).empty());
  }
  // Every op bf16 (CPU autocast's lists lower more; the LayerNorms have no such kernel).
  const Model all = make_preset("gpt:1:32:4:16:2:bf16:64");
  std::set<std::string> want;
  for (const char* name : {"loss", "drop", "h0.attn.scale", "h0.attn.mask", "h0.attn.softmax", "h0.attn.attn_dropout",
                           "h0.attn.y.view", "h0.attn.resid_dropout", "h0.res1", "h0.mlp.gelu", "h0.mlp.dropout",
                           "h0.res2"})
    want.insert(name);
  const std::set<std::string> got = direct_ops(all, PointwiseMode::Direct);
  for (const std::string& n : want) EXPECT_TRUE(got.count(n)) << n;
  for (const std::string& n : got) EXPECT_TRUE(want.count(n) || n == "wpe") << n;
  EXPECT_TRUE(direct_ops(make_preset("gpt:1:32:4:16:2:f32:64"), PointwiseMode::Direct).empty());
}

// A ResNet: its batch norms, ReLUs, residual Adds and loss; not its
// convolutions or its pooling.
TEST(PointwisePath, AResNetsBatchNormsReLUsAndAdds) {
  const Model m = make_preset("resnet:18:8:32:2:5:bf16@cuda");
  int norms = 0, relus = 0, adds = 0;
  for (int v = 0; v < m.size(); ++v) {
    const OpKind k = m.op(v).kind;
    norms += k == OpKind::BatchNorm;
    relus += k == OpKind::ReLU;
    adds += k == OpKind::Add;
    EXPECT_EQ(lowp_io(m, v, false, PointwiseMode::Direct),
              k == OpKind::BatchNorm || k == OpKind::ReLU || k == OpKind::Add || k == OpKind::SoftmaxCELoss)
        << m.op(v).name;
  }
  EXPECT_EQ(norms, 20);
  EXPECT_EQ(relus, 17);
  EXPECT_EQ(adds, 8);
  const PointwisePathCount c = count_pointwise_paths(m, PointwiseMode::Direct);
  EXPECT_EQ(c.direct, 20 + 17 + 8 + 1);
  EXPECT_EQ(c.widening, c.direct + 2);  // the max pool, the global average pool
  EXPECT_EQ(count_pointwise_paths(m, PointwiseMode::F32).direct, 0);
  EXPECT_EQ(count_pointwise_paths(m, PointwiseMode::F32).widening, c.widening);
}

// What `remat run` reports for a GPT block under CUDA autocast: the ten ops
// whose call widens (the ten above, the attention's output copy among them) all
// on 16-bit loads and stores.
TEST(PointwisePath, CountsForTheRunReport) {
  const Model m = make_preset("gpt:1:32:4:16:2:bf16@cuda:64");
  const PointwisePathCount c = count_pointwise_paths(m, PointwiseMode::Direct);
  EXPECT_EQ(c.widening, 10);
  EXPECT_EQ(c.direct, 10);
  const PointwisePathCount f32 = count_pointwise_paths(m, PointwiseMode::F32);
  EXPECT_EQ(f32.widening, 10);
  EXPECT_EQ(f32.direct, 0);
  const PointwisePathCount none = count_pointwise_paths(make_preset("gpt:1:32:4:16:2:f32:64"), PointwiseMode::Direct);
  EXPECT_EQ(none.widening, 0);
  EXPECT_EQ(none.direct, 0);
}

// An Add of a tensor with itself (both terms summed in f32 before one
// rounding), one reading a transposed view (strided), a learned AddConst
// (its parameter's gradient sums f32 G): the widening call.
TEST(PointwisePath, RepeatedStridedAndLearnedStayWidened) {
  Model m;
  m.name = "odd";
  const int x = m.add(testing::make_op(OpKind::Input, {}, {6, 6}, DType::BF16));
  const int twice = m.add(testing::make_op(OpKind::Add, {x, x}, {6, 6}, DType::BF16));
  Op t = testing::make_op(OpKind::Transpose, {twice}, {6, 6}, DType::BF16);
  t.attrs.edit().perm = {1, 0};
  const int tr = m.add(t);
  const int strided = m.add(testing::make_op(OpKind::ReLU, {tr}, {6, 6}, DType::BF16));
  Op pos = testing::make_op(OpKind::AddConst, {strided}, {6, 6}, DType::BF16);
  pos.attrs.edit().const_shape = {6, 6};
  pos.attrs.edit().learned = true;
  const int learned = m.add(pos);
  const int fine = m.add(testing::make_op(OpKind::GELU, {learned}, {6, 6}, DType::BF16));
  m.add(testing::make_op(OpKind::MSELoss, {fine}, {}, DType::F32));
  m.finalize();
  ASSERT_TRUE(m.op(tr).view);
  EXPECT_FALSE(lowp_io(m, twice, false, PointwiseMode::Direct));
  EXPECT_FALSE(lowp_io(m, tr, false, PointwiseMode::Direct));
  EXPECT_FALSE(lowp_io(m, strided, false, PointwiseMode::Direct));
  EXPECT_FALSE(lowp_io(m, learned, false, PointwiseMode::Direct));
  EXPECT_TRUE(lowp_io(m, fine, false, PointwiseMode::Direct));
  EXPECT_FALSE(lowp_io(m, fine, false, PointwiseMode::F32));
}

// A Reshape that copies takes the 16-bit path where its input's map has a
// pointwise geometry (rank 8 at most once coalesced): a transposed matrix
// does; a tensor of nine dimensions read in reverse order does not.
TEST(PointwisePath, AReshapeCopyWhoseMapHasNoGeometryStaysWidened) {
  for (const int rank : {2, 9}) {
    SCOPED_TRACE(rank);
    Model m;
    m.name = "reversed";
    const std::vector<int64_t> shape(static_cast<std::size_t>(rank), 2);
    const int x = m.add(testing::make_op(OpKind::Input, {}, shape, DType::BF16));
    const int h = m.add(testing::make_op(OpKind::GELU, {x}, shape, DType::BF16));
    Op t = testing::make_op(OpKind::Transpose, {h}, shape, DType::BF16);
    for (int d = rank; d-- > 0;) t.attrs.edit().perm.push_back(d);
    const int tr = m.add(t);
    const int64_t n = int64_t{1} << rank;
    const int flat = m.add(testing::make_op(OpKind::Reshape, {tr}, {n}, DType::BF16));
    const int g = m.add(testing::make_op(OpKind::GELU, {flat}, {n}, DType::BF16));
    m.add(testing::make_op(OpKind::MSELoss, {g}, {}, DType::F32));
    m.finalize();
    ASSERT_TRUE(m.op(tr).view);
    ASSERT_FALSE(m.op(flat).view);  // a copy: its input is strided
    EXPECT_EQ(lowp_io(m, flat, false, PointwiseMode::Direct), rank == 2);
    EXPECT_EQ(lowp_io(m, flat, true, PointwiseMode::Direct), rank == 2);
  }
}

// The plumbing of the tensors handed over (core/exec/mixed_call.h's
// io_operands), checked on the CPU: with set_pointwise_mode(Direct) the f32
// kernels read values widened from exactly the stored tensors the CUDA
// kernels get (the f32 copies the call skips hold NaN), and each result is
// rounded once into, or added to, the tensor handed over, as the CUDA
// kernels store it. Wrong tensors or a wrong rounding would change the loss
// or a gradient; right ones give the widening call's bits under every
// strategy, with the same tracked peak, with either GEMM path.
void expect_same_bits_with_the_stored_tensors(const Model& m, GemmMode gemm) {
  uint64_t per_step = 0;
  for (int v = 0; v < m.size(); ++v)
    per_step += lowp_io(m, v, false, PointwiseMode::Direct) + lowp_io(m, v, true, PointwiseMode::Direct);
  ASSERT_GT(per_step, 0u);
  CpuBackend plain, checked;
  plain.set_gemm_mode(gemm);
  checked.set_gemm_mode(gemm);
  checked.set_pointwise_mode(PointwiseMode::Direct);
  for (const char* st : {"store-all", "sqrt", "recompute-all"}) {
    SCOPED_TRACE(st);
    const Schedule s = testing::schedule_of(m, st);
    const uint64_t before = checked.lowp_io_calls();
    const ExecResult a = execute(m, s, plain, testing::quick());
    const ExecResult b = execute(m, s, checked, testing::quick());
    ASSERT_TRUE(a.ok()) << a.message;
    ASSERT_TRUE(b.ok()) << b.message;
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
    EXPECT_EQ(a.param_grads, b.param_grads);
    EXPECT_EQ(a.tracked_peak_bytes, b.tracked_peak_bytes);
    EXPECT_EQ(a.tracked_peak_bytes, simulate(m, s).peak_bytes);
    // No f32 copy the 16-bit call leaves unwritten is taken: at every
    // instruction no more scratch than the widening call's.
    EXPECT_LE(b.memory.allocator_peak, a.memory.allocator_peak);
    EXPECT_GE(checked.lowp_io_calls() - before, per_step);
  }
  EXPECT_EQ(plain.lowp_io_calls(), 0u);
}
// The same under both GEMM paths, as every test below asks.
void expect_same_bits_with_the_stored_tensors(const Model& m) {
  for (const GemmMode g : {GemmMode::F32, GemmMode::TensorCore}) {
    SCOPED_TRACE(std::string(gemm_mode_name(g)));
    expect_same_bits_with_the_stored_tensors(m, g);
  }
}

TEST(PointwisePath, StoredTensorsOfPresetsGiveTheWideningCallsBitsOnTheCpu) {
  for (const char* spec : {"gpt:2:32:4:16:2:bf16@cuda:64", "gpt:1:32:4:16:2:f16@cuda:64", "gpt:1:32:4:16:2:bf16:64",
                           "resnet:10:4:32:2:5:bf16@cuda", "resnet:10:4:32:2:5:f16@cuda"}) {
    SCOPED_TRACE(spec);
    const Model m = make_preset(spec);
    expect_same_bits_with_the_stored_tensors(m);
  }
}

// A captured Llama-style decoder under bf16 autocast: its pointwise family's
// ops that read or write bf16 (autocast's casts, SwiGLU's product, the
// rotary embedding's products and negations of strided halves; RMSNorm runs
// in f32, unwidened) on stored tensors too, strided ones read through their
// strides: the widening call's bits under every strategy.
TEST(PointwisePath, ACapturedLlamasPointwiseFamilyGivesTheWideningCallsBitsOnTheCpu) {
  const Model m = load_model(REMAT_EXEC_TEST_MODELS "/llama_bf16_small.json");
  int direct = 0, strided = 0, widening = 0;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    if (op.kind != OpKind::Pointwise) continue;
    const bool io = lowp_io(m, v, false, PointwiseMode::Direct);
    direct += io;
    strided += io && reads_strided(m, v);
    widening += !io && runs_mixed(m, v);
  }
  EXPECT_EQ(direct, 28);   // 14 a layer
  EXPECT_EQ(strided, 10);  // 5 a layer
  EXPECT_EQ(widening, 0);
  expect_same_bits_with_the_stored_tensors(m);
}

// The views of a captured bf16 Llama: each one's backward adds G(view) back
// onto G(input) as stored (the head reshapes, the transposes, the rotary
// halves' slices, the attention's expands of k and v), but none whose
// storage is f32 (which runs no mixed call); no view's forward is on the path
// (it computes nothing), and none under REMAT_CUDA_POINTWISE=f32. The CPU's
// emulation gives the widening call's bits with them on (the -0 + 0 of the
// f32 scratch the widening call zeroes included: a Slice's untouched
// elements, added to, turn -0 into +0).
TEST(PointwisePath, ViewGradientsOfBf16StoragesAreStoredDirectly) {
  const Model m = load_model(REMAT_EXEC_TEST_MODELS "/llama_bf16_small.json");
  std::map<OpKind, int> direct, widened;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    if (!op.view) continue;
    EXPECT_FALSE(lowp_io(m, v, false, PointwiseMode::Direct)) << op.name;
    EXPECT_FALSE(lowp_io(m, v, true, PointwiseMode::F32)) << op.name;
    const bool low = op.dtype == DType::BF16;
    EXPECT_EQ(lowp_io(m, v, true, PointwiseMode::Direct), low) << op.name;
    ++(low ? direct : widened)[op.kind];
  }
  // The reshapes of the heads' splits and merges and of the GQA repeats, 4
  // transposes a layer, 4 slices (rotary halves of q and k), 4 expands (k, v
  // repeated over the query groups); the transpose of the rotated k is f32
  // (autocast computes the rotary product in f32), so its gradient needs no
  // widening call at all.
  EXPECT_EQ(direct, (std::map<OpKind, int>{{OpKind::Reshape, 51}, {OpKind::Transpose, 8}, {OpKind::Slice, 8},
                                           {OpKind::Expand, 8}}));
  EXPECT_EQ(widened, (std::map<OpKind, int>{{OpKind::Transpose, 2}}));
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).view && m.op(v).dtype != DType::BF16) {
      EXPECT_FALSE(runs_mixed(m, v)) << m.op(v).name;
    }
  }
  expect_same_bits_with_the_stored_tensors(m);
}

// pointwise_small.json in bf16: the pointwise family broadcast both ways (a
// statistic over the rows, an amax over the columns), strided (exp of a
// transposed view, the negated half of a slice, an add of a transposed
// operand), where, maximum, a scalar constant.
TEST(PointwisePath, BroadcastAndStridedPointwiseOpsGiveTheWideningCallsBitsOnTheCpu) {
  const Model m = testing::model_in_bf16(REMAT_EXEC_TEST_MODELS "/pointwise_small.json");
  int direct = 0, broadcast = 0, strided = 0;
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    if (op.kind != OpKind::Pointwise || !lowp_io(m, v, false, PointwiseMode::Direct)) continue;
    ++direct;
    broadcast += std::any_of(op.inputs.begin(), op.inputs.end(), [&](int u) { return m.op(u).numel() != op.numel(); });
    strided += reads_strided(m, v);
  }
  EXPECT_EQ(direct, 12);  // all 13 but the product by a learned constant
  EXPECT_EQ(broadcast, 2);
  EXPECT_EQ(strided, 3);
  expect_same_bits_with_the_stored_tensors(m);
}

// By hand: gradients that add (add_stored: the f32 sum of the stored
// gradient and the rounded term, rounded once), which a preset's 16-bit
// ops never meet (the other reader of their inputs comes first backward).
// h (bf16) is read by a GELU and then a ReLU, whose backward stores G(h) and
// the GELU's adds; a (bf16) by an Add and then a second Add, whose gradient
// copies store and add; p (a softmax's f32 output) by an f32 Add and then a
// bf16 Dropout, the Add's f32 copy adding.
TEST(PointwisePath, GradientsThatAddGiveTheWideningCallsBitsOnTheCpu) {
  for (const DType low : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(low)));
    Model m;
    m.name = "adds";
    const int x = m.add(testing::make_op(OpKind::Input, {}, {6, 16}, DType::F32));
    const int h = m.add(testing::make_op(OpKind::Linear, {x}, {6, 16}, low));
    const int a = m.add(testing::make_op(OpKind::GELU, {h}, {6, 16}, low));
    const int b = m.add(testing::make_op(OpKind::ReLU, {h}, {6, 16}, low));
    const int s = m.add(testing::make_op(OpKind::Add, {a, b}, {6, 16}, low));
    Op sm = testing::make_op(OpKind::Softmax, {s}, {6, 16}, DType::F32);
    sm.attrs.edit().axis = -1;
    const int p = m.add(sm);
    const int r = m.add(testing::make_op(OpKind::Add, {p, a}, {6, 16}, DType::F32));
    Op drop = testing::make_op(OpKind::Dropout, {p}, {6, 16}, low);
    drop.dropout_p = 0.25f;
    const int t = m.add(drop);
    const int u = m.add(testing::make_op(OpKind::Add, {r, t}, {6, 16}, DType::F32));
    m.add(testing::make_op(OpKind::MSELoss, {u}, {}, DType::F32));
    m.finalize();
    for (const int v : {a, b, s, p, r, t, u}) EXPECT_TRUE(lowp_io(m, v, true, PointwiseMode::Direct)) << m.op(v).name;
    expect_same_bits_with_the_stored_tensors(m);
  }
}

// A bf16 attention whose q (a GELU of the f32 input) is in `qt`: in f32,
// autocast casts it (its bf16 copy in aux); then an f32 attention of the
// input (q = k = v), the two added in f32.
Model attention_with_q(DType qt) {
  Model m;
  m.name = "attention with q in " + std::string(dtype_name(qt));
  const int x = m.add(testing::make_op(OpKind::Input, {}, {2, 6, 8}, DType::F32));
  const int q = m.add(testing::make_op(OpKind::GELU, {x}, {2, 6, 8}, qt));
  const int k = m.add(testing::make_op(OpKind::Linear, {x}, {2, 6, 8}, DType::BF16));
  const int v = m.add(testing::make_op(OpKind::Linear, {x}, {2, 6, 8}, DType::BF16));
  Op attn = testing::make_op(OpKind::Attention, {q, k, v}, {2, 6, 8}, DType::BF16);
  attn.name = "attn";
  const int a = m.add(attn);
  Op f32 = testing::make_op(OpKind::Attention, {x, x, x}, {2, 6, 8}, DType::F32);
  f32.name = "attn.f32";
  const int f = m.add(f32);
  const int s = m.add(testing::make_op(OpKind::Add, {a, f}, {2, 6, 8}, DType::F32));
  const int r = m.add(testing::make_op(OpKind::GELU, {s}, {2, 6, 8}, DType::BF16));
  m.add(testing::make_op(OpKind::MSELoss, {r}, {}, DType::F32));
  m.finalize();
  return m;
}

// The fused attention (scaled_dot_product_attention) takes the 16-bit path
// where q, k, v are three tensors of its own bf16/f16 dtype: attention_small's
// causal one (q, k, v strided views of one projection), tail_small's (an
// additive mask), attention_adds' (strided k and v); not attention_small's
// second (one tensor read as q, k and v: three gradients summed in f32 first),
// nor one whose q autocast casts (an f32 tensor: its copy in aux), nor an f32
// model's. remat run's count takes it among the ops that widen.
TEST(PointwisePath, AFusedAttentionOfItsOwn16BitDtype) {
  for (const char* dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    for (const char* file : {"attention_small", "tail_small", "attention_adds"}) {
      SCOPED_TRACE(file);
      const Model m = testing::model_in(std::string(REMAT_EXEC_TEST_MODELS "/") + file + ".json", dtype);
      int attentions = 0, direct = 0;
      for (int v = 0; v < m.size(); ++v) {
        if (m.op(v).kind != OpKind::Attention) continue;
        ++attentions;
        const bool io = lowp_io(m, v, false, PointwiseMode::Direct);
        EXPECT_EQ(lowp_io(m, v, true, PointwiseMode::Direct), io) << m.op(v).name;
        EXPECT_FALSE(lowp_io(m, v, false, PointwiseMode::F32)) << m.op(v).name;
        EXPECT_EQ(io, m.op(v).name == "attn") << m.op(v).name;
        direct += io;
      }
      EXPECT_EQ(attentions, std::string(file) == "attention_small" ? 2 : 1);
      EXPECT_EQ(direct, 1);
      direct_ops(m, PointwiseMode::Direct);  // its count of the ops that widen, Attention among them
    }
  }
  // attention_small in bf16, what remat run reports: its two Attentions and
  // the loss widen, the first Attention loads and stores 16 bits. The heads'
  // merge after it is a view: the attention writes its output in the
  // (batch, t, heads, d) order the merge reads (strided, its columns
  // adjacent), which the 16-bit kernel writes through as the f32 one does.
  const Model small = testing::model_in(REMAT_EXEC_TEST_MODELS "/attention_small.json", "bf16");
  const PointwisePathCount c = count_pointwise_paths(small, PointwiseMode::Direct);
  EXPECT_EQ(c.widening, 3);
  EXPECT_EQ(c.direct, 1);
  EXPECT_EQ(count_pointwise_paths(small, PointwiseMode::F32).widening, 3);
  EXPECT_EQ(count_pointwise_paths(small, PointwiseMode::F32).direct, 0);
  for (int v = 0; v < small.size(); ++v) {
    const Op& op = small.op(v);
    if (op.name == "attn.merge") {
      EXPECT_TRUE(op.view);
    }
    if (op.name == "attn") {
      EXPECT_EQ(layout_of(op), (std::vector<int64_t>{96, 8, 16, 1}));  // (2, 2, 6, 8) stored as (2, 6, 2, 8)
    }
  }
  // By hand: q in f32 (autocast casts it: its copy in aux), or an f32 attention.
  for (const DType qt : {DType::F32, DType::BF16}) {
    const Model m = attention_with_q(qt);
    const int a = m.size() - 5, f = m.size() - 4;
    ASSERT_EQ(m.op(a).name, "attn");
    ASSERT_EQ(m.op(f).name, "attn.f32");
    EXPECT_EQ(lowp_io(m, a, false, PointwiseMode::Direct), qt == DType::BF16) << dtype_name(qt);
    EXPECT_EQ(lowp_io(m, a, true, PointwiseMode::Direct), qt == DType::BF16) << dtype_name(qt);
    EXPECT_FALSE(lowp_io(m, f, false, PointwiseMode::Direct));
    // Nor does one with a cast input run at all yet: its saved set holds the
    // cast (in aux), not q, which the kernels read.
    EXPECT_EQ(executable(m.op(a)), qt == DType::BF16) << dtype_name(qt);
  }
}

// The fused attention's plumbing on the CPU (the kernels read q, k, v, A(v)
// and G(v) as stored, through the same strides; A(v) and each gradient
// rounded once into its tensor, stored or added): the widening call's bits
// under every strategy and both GEMM paths, in bf16 and f16, causal (strided
// q, k, v from one projection), with an additive mask, and with gradients
// that add (attention_adds: G(q) and G(v) stored first by a GELU and an Add).
TEST(PointwisePath, AFusedAttentionGivesTheWideningCallsBitsOnTheCpu) {
  for (const char* dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    for (const char* file : {"attention_small", "tail_small", "attention_adds"}) {
      SCOPED_TRACE(file);
      const Model m = testing::model_in(std::string(REMAT_EXEC_TEST_MODELS "/") + file + ".json", dtype);
      expect_same_bits_with_the_stored_tensors(m);
    }
  }
}

}  // namespace
}  // namespace remat
