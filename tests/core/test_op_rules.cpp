// The per-kind rules of op_rules.cpp: shapes, bytes, saved sets (PyTorch's),
// aux sizes, parameters, layouts; each expected value derived in a comment.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/model/op_layout.h"
#include "core/model/op_rules.h"

using namespace remat;

namespace {

Op make(OpKind k, std::vector<int> in, std::vector<int64_t> shape = {}) {
  Op op;
  op.kind = k;
  op.inputs = std::move(in);
  op.shape = std::move(shape);
  return op;
}

std::string error_of(Model& m, Op op) {
  try {
    m.add(std::move(op), "op X");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OpRules, ConvShapeParamsFlops) {
  Model m;
  m.add(make(OpKind::Input, {}, {8, 3, 32, 32}));
  Op c = make(OpKind::Conv, {0});
  c.attrs = {.channels = 64, .kernel = {7, 7}, .stride = {2, 2}, .pads = {3, 3, 3, 3}};
  c.attrs.edit().bias = false;
  const int v = m.add(std::move(c));
  // (32 + 3 + 3 - 7) / 2 + 1 = 16
  EXPECT_EQ(m.op(v).shape, (std::vector<int64_t>{8, 64, 16, 16}));
  EXPECT_EQ(m.op(v).bytes, 8u * 64 * 16 * 16 * 4);
  EXPECT_EQ(m.op(v).param_bytes, 64u * 3 * 7 * 7 * 4);
  EXPECT_DOUBLE_EQ(m.op(v).fwd_flops, 2.0 * 8 * 64 * 16 * 16 * (3 * 49));
  EXPECT_EQ(m.op(v).saved, (std::vector<int>{0}));  // the input (grad of the weight), not the output
  EXPECT_EQ(m.op(v).aux_bytes, 0u);
}

TEST(OpRules, Conv1dDilationGroups) {
  Model m;
  m.add(make(OpKind::Input, {}, {1, 4, 10}));
  Op c = make(OpKind::Conv, {0});
  c.attrs = {.channels = 6, .kernel = {3}, .pads = {1, 1}, .dilation = {2}, .groups = 2};
  const int v = m.add(std::move(c));
  // (10 + 1 + 1 - 2*(3-1) - 1) / 1 + 1 = 8; weights 6 x (4/2) x 3 plus 6 biases
  EXPECT_EQ(m.op(v).shape, (std::vector<int64_t>{1, 6, 8}));
  EXPECT_EQ(m.op(v).param_bytes, (6u * 2 * 3 + 6) * 4);
  Op bad = make(OpKind::Conv, {0});
  bad.attrs = {.channels = 6, .kernel = {3}, .groups = 3};
  EXPECT_NE(error_of(m, bad).find("groups 3 must divide the input channels 4"), std::string::npos);
}

TEST(OpRules, PoolsBatchNormGlobalPool) {
  Model m;
  m.add(make(OpKind::Input, {}, {2, 3, 5, 5}));
  Op mp = make(OpKind::MaxPool, {0});
  mp.attrs.edit().kernel = {2, 2};  // stride defaults to the kernel, as in torch
  const int floor_pool = m.add(mp);
  mp.attrs.edit().ceil_mode = true;
  mp.attrs.edit().stride.clear();
  const int ceil_pool = m.add(mp);
  EXPECT_EQ(m.op(floor_pool).shape, (std::vector<int64_t>{2, 3, 2, 2}));  // floor(4/2)+1
  EXPECT_EQ(m.op(ceil_pool).shape, (std::vector<int64_t>{2, 3, 3, 3}));   // ceil(3/2)+1 = 3
  // MaxPool saves its input and the int64 argmax of every output element.
  EXPECT_EQ(m.op(ceil_pool).saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(ceil_pool).aux_bytes, 2u * 3 * 3 * 3 * 8);
  Op ap = make(OpKind::AvgPool, {0});
  ap.attrs.edit().kernel = {3, 3};
  ap.attrs.edit().stride = {1, 1};
  const int avg = m.add(ap);
  EXPECT_EQ(m.op(avg).shape, (std::vector<int64_t>{2, 3, 3, 3}));
  EXPECT_EQ(m.op(avg).saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(avg).aux_bytes, 0u);
  const int bn = m.add(make(OpKind::BatchNorm, {0}));
  EXPECT_EQ(m.op(bn).saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(bn).aux_bytes, 2u * 3 * 4);  // batch mean and inverse std per channel
  EXPECT_EQ(m.op(bn).param_bytes, 4u * 3 * 4);  // weight, bias, running mean, running var
  const int gap = m.add(make(OpKind::GlobalAvgPool, {bn}));
  EXPECT_EQ(m.op(gap).shape, (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(m.op(gap).saved, (std::vector<int>{bn}));
}

// PyTorch's adaptive_avg_pool2d as an AvgPool with output_size: any output
// size, its input saved (as _adaptive_avg_pool2d_backward reads it), no
// window attributes; pools with ceil_mode or dilation are kernels' business.
TEST(OpRules, AdaptiveAvgPoolAndPoolAttributesTheKernelsRun) {
  Model m;
  m.add(make(OpKind::Input, {}, {2, 3, 4, 5}));
  Op ap = make(OpKind::AvgPool, {0});
  ap.attrs.edit().output_size = {6, 3};
  const int v = m.add(ap);
  EXPECT_EQ(m.op(v).shape, (std::vector<int64_t>{2, 3, 6, 3}));
  EXPECT_EQ(m.op(v).saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(v).aux_bytes, 0u);
  EXPECT_EQ(kernel_attr_problem(m.op(v)), "");
  Op both = ap;
  both.attrs.edit().kernel = {2, 2};
  EXPECT_NE(error_of(m, both).find("takes no kernel, stride, pads, ceil_mode or count_include_pad"), std::string::npos);
  Op rank = ap;
  rank.attrs.edit().output_size = {6};
  EXPECT_NE(error_of(m, rank).find("needs an output_size of 2 dimension(s), got [6]"), std::string::npos);
  Op mp = make(OpKind::MaxPool, {0});
  mp.attrs = {.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}, .ceil_mode = true};
  const int dilated = m.add(mp);
  EXPECT_EQ(m.op(dilated).shape, (std::vector<int64_t>{2, 3, 2, 3}));  // 4 - 2 - 1 + 1, 5 - 2 - 1 + 1
  EXPECT_EQ(kernel_attr_problem(m.op(dilated)), "");
  Op np = make(OpKind::AvgPool, {0});
  np.attrs = {.kernel = {3, 3}, .stride = {2, 2}, .pads = {1, 1, 1, 1}, .ceil_mode = true, .count_include_pad = false};
  EXPECT_EQ(m.op(m.add(np)).shape, (std::vector<int64_t>{2, 3, 3, 3}));  // (4 + 2 - 3 + 1) / 2 + 1, last start 4 < 4 + 1
}

TEST(OpRules, ActivationsSaveWhatTheirDerivativeReads) {
  Model m;
  m.add(make(OpKind::Input, {}, {4, 4}));
  EXPECT_EQ(m.op(m.add(make(OpKind::Sigmoid, {0}))).saved, (std::vector<int>{1}));  // y(1-y)
  EXPECT_EQ(m.op(m.add(make(OpKind::SiLU, {0}))).saved, (std::vector<int>{0}));     // x
  Op sm = make(OpKind::Softmax, {0});
  const int s = m.add(sm);
  EXPECT_EQ(m.op(s).saved, (std::vector<int>{s}));
  Op mul = make(OpKind::MulConst, {0});
  mul.attrs.edit().const_shape = {1, 4};
  const int c = m.add(mul);
  EXPECT_TRUE(m.op(c).saved.empty());
  mul.attrs.edit().const_shape = {2, 4};
  EXPECT_NE(error_of(m, mul).find("does not broadcast onto [4,4]"), std::string::npos);
}

TEST(OpRules, MatMulSavesInputsOrTheCopiesTorchMakes) {
  Model m;
  m.add(make(OpKind::Input, {}, {2, 3, 4, 5}));
  const int r = m.add(make(OpKind::ReLU, {0}));
  Op t = make(OpKind::Transpose, {r});
  t.attrs.edit().perm = {0, 2, 1, 3};  // [2,4,3,5], strides (60,5,20,1)
  const int a = m.add(t);
  t.attrs.edit().perm = {0, 2, 3, 1};  // [2,4,5,3], strides (60,5,1,20)
  const int b = m.add(t);
  const int ab = m.add(make(OpKind::MatMul, {a, b}));
  EXPECT_EQ(m.op(ab).shape, (std::vector<int64_t>{2, 4, 3, 3}));
  // Neither folds into (8, rows, k) without a copy (batch strides 60 and 5 do
  // not chain): bmm saves two copies of 120 floats.
  EXPECT_TRUE(m.op(ab).saved.empty());
  EXPECT_EQ(m.op(ab).aux_bytes, 2u * 120 * 4);
  t.attrs.edit().perm = {0, 1, 3, 2};  // [2,3,5,4], strides (60,20,1,5): batch dims still chain
  const int rt = m.add(t);
  const int rr = m.add(make(OpKind::MatMul, {r, rt}));
  EXPECT_EQ(m.op(rr).saved, (std::vector<int>{r, rt}));
  EXPECT_EQ(m.op(rr).aux_bytes, 0u);
  EXPECT_EQ(m.op(rr).shape, (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_DOUBLE_EQ(m.op(rr).fwd_flops, 2.0 * 6 * 4 * 5 * 4);
}

// Attention saves q, k, v, itself and a float logsumexp per row; its output
// is laid out in q's dimension order, as PyTorch's CPU kernel lays it.
TEST(OpRules, AttentionSavesItsInputsItselfAndTheRowsLogSumExp) {
  Model m;
  m.add(make(OpKind::Input, {}, {2, 5, 3, 4}));  // (batch, t, heads, d)
  const int x = m.add(make(OpKind::ReLU, {0}));
  Op t = make(OpKind::Transpose, {x});
  t.attrs.edit().perm = {0, 2, 1, 3};  // (2, 3, 5, 4), strides (60, 4, 12, 1)
  const int q = m.add(t);
  Op a = make(OpKind::Attention, {q, q, q});
  a.attrs.edit().causal = true;
  const int at = m.add(a);
  const Op op = m.op(at);  // a copy: adding ops below reallocates the model's op list
  EXPECT_EQ(op.shape, (std::vector<int64_t>{2, 3, 5, 4}));
  EXPECT_EQ(op.saved, (std::vector<int>{q, at}));  // q = k = v saved once, and the output
  EXPECT_EQ(op.aux_bytes, 2u * 3 * 5 * 4);          // one f32 per (batch, head, query)
  EXPECT_EQ(op.bytes, 2u * 3 * 5 * 4 * 4);
  // (batch, t, heads, d) in memory, like q: transposing back is contiguous.
  EXPECT_EQ(layout_of(op), (std::vector<int64_t>{60, 4, 12, 1}));
  EXPECT_TRUE(executable(op));
  // A contiguous q gives a contiguous output.
  const int c = m.add(make(OpKind::Attention, {0, 0, 0}));
  EXPECT_TRUE(m.op(c).strides->empty());
  // 2·(d + dv) + 4 per score for the forward, 10·d + 6 for the backward (d = dv = 4; 2·3 heads, 5x5 scores).
  EXPECT_DOUBLE_EQ(op.fwd_flops, 6.0 * 25 * (8 + 8 + 4));
  EXPECT_DOUBLE_EQ(op.bwd_flops, 6.0 * 25 * (8 + 16 + 16 + 6));
  // Without its output or its logsumexp kept, the kernels cannot run it.
  Op lean = make(OpKind::Attention, {q, q, q});
  lean.saved = {q};
  const int l = m.add(lean, "lean", true);
  EXPECT_FALSE(executable(m.op(l)));
  Op v = make(OpKind::Input, {}, {2, 3, 6, 7});
  EXPECT_NE(error_of(m, make(OpKind::Attention, {q, q, m.add(v)})).find("k and v differ in length"), std::string::npos);
  const int flat = m.add(make(OpKind::Input, {}, {6, 4}));
  EXPECT_NE(error_of(m, make(OpKind::Attention, {flat, flat, flat})).find("rank 3 to 4"), std::string::npos);
}

// A norm's statistics kept in 16 bits (PyTorch's CPU LayerNorm and GroupNorm on
// a bf16 input, 1.13 and 2.6: mean and rstd in the input's dtype) run, as f32
// ones do (the mixed call narrows them into aux: core/exec/mixed_call.h);
// fewer bytes than the 16-bit statistics take do not.
TEST(OpRules, NormStatisticsIn16BitsRun) {
  Model m;
  Op x = make(OpKind::Input, {}, {4, 16});
  x.dtype = DType::BF16;
  const int in = m.add(x);
  Op ln = make(OpKind::LayerNorm, {in});
  ln.dtype = DType::BF16;
  Op op = m.op(m.add(ln));
  EXPECT_EQ(op.aux_bytes, 4u * 8);  // mean and rstd, f32, per row: 4 rows
  EXPECT_EQ(exec_problem(op), "");
  op.aux_bytes = 4 * 4;  // 2 bytes each: the CPU's bf16 statistics
  EXPECT_EQ(exec_problem(op), "");
  op.aux_bytes = 4 * 4 - 2;  // short of the bf16 statistics
  EXPECT_EQ(exec_problem(op), "it keeps no mean and rstd per row (aux)");
  op.aux_bytes = 0;
  EXPECT_EQ(exec_problem(op), "it keeps no mean and rstd per row (aux)");
}

TEST(OpRules, ViewsReshapeSliceExpand) {
  Model m;
  m.add(make(OpKind::Input, {}, {6, 10}));
  const int r = m.add(make(OpKind::Reshape, {0}, {3, 2, 10}));
  EXPECT_TRUE(m.op(r).view);
  EXPECT_EQ(m.op(r).bytes, 0u);
  EXPECT_EQ(m.op(r).storage, 0);
  Op t = make(OpKind::Transpose, {0});
  const int tr = m.add(t);  // default: reversed axes, [10,6]
  EXPECT_EQ(m.op(tr).shape, (std::vector<int64_t>{10, 6}));
  const int flat = m.add(make(OpKind::Reshape, {tr}, {60}));
  EXPECT_FALSE(m.op(flat).view);  // a transposed tensor cannot be flattened in place: a copy
  EXPECT_EQ(m.op(flat).bytes, 240u);
  Op s = make(OpKind::Slice, {0});
  s.attrs = {.axis = 1, .start = 2, .end = 9, .step = 3};
  const int sl = m.add(s);
  EXPECT_EQ(m.op(sl).shape, (std::vector<int64_t>{6, 3}));  // columns 2, 5, 8
  EXPECT_EQ(*m.op(sl).strides, (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(m.op(sl).logical_bytes(), 6u * 3 * 4);  // the size of its gradient
  const int row = m.add(make(OpKind::Reshape, {m.add([] {
                                                Op o = make(OpKind::Slice, {0});
                                                o.attrs = {.axis = 0, .start = 0, .end = 1};
                                                return o;
                                              }())},
                             {1, 10}));
  const int ex = m.add(make(OpKind::Expand, {row}, {4, 1, 10}));
  EXPECT_EQ(*m.op(ex).strides, (std::vector<int64_t>{0, 10, 1}));
  EXPECT_EQ(m.storage(ex), 0);
  // copy: PyTorch's clone, a tensor of its own even where a view would do, and
  // of an expanded tensor, every element the expansion repeats.
  Op clone = make(OpKind::Reshape, {0}, {6, 10});
  clone.attrs = {.copy = true};
  const int cl = m.add(clone);
  EXPECT_FALSE(m.op(cl).view);
  EXPECT_EQ(m.op(cl).bytes, 240u);
  EXPECT_EQ(m.storage(cl), cl);
  EXPECT_DOUBLE_EQ(m.op(cl).fwd_flops, 60.0);
  clone = make(OpKind::Reshape, {ex}, {4, 1, 10});
  clone.attrs = {.copy = true};
  const int cx = m.add(clone);
  EXPECT_FALSE(m.op(cx).view);
  EXPECT_EQ(m.op(cx).bytes, 160u);
  Op bad = make(OpKind::Reshape, {0}, {7, 9});
  EXPECT_NE(error_of(m, bad).find("changes the element count"), std::string::npos);
  bad = make(OpKind::Transpose, {0});
  bad.bytes = 8;
  EXPECT_NE(error_of(m, bad).find("owns no bytes"), std::string::npos);
}

TEST(OpRules, EmbeddingConcatAndIntegerIds) {
  Model m;
  Op ids = make(OpKind::Input, {}, {2, 5});
  ids.dtype = DType::I64;
  m.add(ids);
  Op e = make(OpKind::Embedding, {0}, {2, 5, 8});
  e.attrs.edit().vocab = 100;
  const int emb = m.add(e);
  EXPECT_EQ(m.op(emb).saved, (std::vector<int>{0}));  // the ids
  EXPECT_EQ(m.op(emb).param_bytes, 100u * 8 * 4);
  EXPECT_FALSE(m.has_grad_tensor(0));
  Op c = make(OpKind::Concat, {emb, emb});
  c.attrs.edit().axis = -1;
  const int cat = m.add(c);
  EXPECT_EQ(m.op(cat).shape, (std::vector<int64_t>{2, 5, 16}));
  EXPECT_TRUE(m.op(cat).saved.empty());
  Op on_floats = make(OpKind::Embedding, {emb}, {2, 5, 8, 8});
  on_floats.attrs.edit().vocab = 10;
  EXPECT_NE(error_of(m, on_floats).find("looks rows up by integer ids"), std::string::npos);
}

TEST(OpLayout, ViewStridesFollowTorch) {
  // (B,T,H,hs) transposed to (B,H,T,hs) cannot merge B and H.
  EXPECT_FALSE(view_strides({2, 4, 8, 16}, {512, 16, 128, 1}, {8, 8, 16}));
  // A contiguous tensor views as anything of its size.
  EXPECT_EQ(*view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}), (std::vector<int64_t>{4, 1}));
  // A slice of columns keeps its row stride when its rows are split.
  EXPECT_EQ(*view_strides({4, 6}, {18, 1}, {2, 2, 6}), (std::vector<int64_t>{36, 18, 1}));
  EXPECT_TRUE(is_contiguous({3, 1, 4}, {4, 99, 1}));
  EXPECT_FALSE(is_contiguous({3, 4}, {1, 3}));
}

// Label smoothing changes what the loss computes (a row sum more per element
// in the forward), not what it keeps: the logits (f32) or autocast's f32
// log-probabilities (bf16 logits), as without; outside [0, 1] it is refused.
TEST(OpRules, LabelSmoothingKeepsWhatThePlainCrossEntropyKeeps) {
  for (const DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Op plain, smoothed;
    for (const double eps : {0.0, 0.1}) {
      Model m;
      Op in = make(OpKind::Input, {}, {4, 8});
      in.dtype = dt;
      m.add(std::move(in));
      Op relu = make(OpKind::ReLU, {0});
      relu.dtype = dt;
      m.add(std::move(relu));
      Op loss = make(OpKind::SoftmaxCELoss, {1});
      loss.attrs.edit().label_smoothing = eps;
      m.add(std::move(loss), "loss");
      m.finalize();
      (eps == 0 ? plain : smoothed) = m.op(2);
    }
    EXPECT_EQ(smoothed.saved, plain.saved);
    EXPECT_EQ(smoothed.aux_bytes, plain.aux_bytes);
    EXPECT_EQ(smoothed.aux_bytes, dt == DType::F32 ? 0u : 4u * 32);
    EXPECT_EQ(smoothed.fwd_flops, plain.fwd_flops + 32);
    EXPECT_EQ(smoothed.bwd_flops, plain.bwd_flops);
  }
  Model bad;
  bad.add(make(OpKind::Input, {}, {4, 8}));
  Op loss = make(OpKind::SoftmaxCELoss, {0});
  loss.attrs.edit().label_smoothing = 1.5;
  try {
    bad.add(std::move(loss), "loss");
    bad.finalize();
    ADD_FAILURE() << "label_smoothing 1.5 accepted";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("label_smoothing must lie in [0, 1], got 1.5"), std::string::npos) << what;
    EXPECT_EQ(what.find("1.50"), std::string::npos) << what;
  }
}

// A loss kernel reads its input again in the backward, or what it keeps in
// aux instead: cross-entropy's log-probabilities (a PyTorch capture, or
// autocast's f32 ones), MSE's and BCE's f32 copy of its input (autocast's cast). Aux too
// small to hold them cannot run, and `remat run` refuses it up front.
TEST(OpRules, ALossThatDoesNotKeepItsInputRunsOnlyFromAnF32CopyInAux) {
  for (const OpKind kind : {OpKind::SoftmaxCELoss, OpKind::MSELoss, OpKind::BCEWithLogitsLoss}) {
    for (const uint64_t aux : {uint64_t{0}, uint64_t{4 * 8 * 4}, uint64_t{2 * 8 * 4}}) {
      SCOPED_TRACE(std::string(kind_name(kind)) + " keeping " + std::to_string(aux) + " bytes of aux");
      Model m;
      m.add(make(OpKind::Input, {}, {4, 8}));
      m.add(make(OpKind::ReLU, {0}));
      Op loss = make(kind, {1});
      const bool explicit_saved = aux > 0;
      if (explicit_saved) loss.aux_bytes = aux;  // the input not saved
      m.add(std::move(loss), "loss", explicit_saved);
      m.finalize();
      EXPECT_EQ(ce_keeps_log_probs(m.op(2)), explicit_saved && kind == OpKind::SoftmaxCELoss);
      EXPECT_EQ(target_loss_keeps_f32_input(m.op(2)), explicit_saved && kind != OpKind::SoftmaxCELoss);
      EXPECT_TRUE(executable(m.op(2)));
      EXPECT_EQ(m.executable(), aux == 0 || aux == 4 * 8 * 4);
    }
  }
}
