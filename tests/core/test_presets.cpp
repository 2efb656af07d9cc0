#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/model/model_graph.h"
#include "core/model/op_rules.h"
#include "core/model/presets.h"
#include "tests/support/input_error.h"

using namespace remat;

namespace {
std::string error_of(const char* spec) {
  return remat::testing::input_error_of([&] { make_preset(spec); }, "");
}
}  // namespace

TEST(Presets, ChainIsInputDensesAndLoss) {
  const Model m = make_preset("chain:16");
  ASSERT_EQ(m.size(), 17);
  EXPECT_EQ(m.op(0).kind, OpKind::Input);
  for (int v = 1; v < 16; ++v) {
    EXPECT_EQ(m.op(v).kind, OpKind::Dense);
    EXPECT_EQ(m.op(v).inputs, std::vector<int>{v - 1});
    EXPECT_EQ(m.op(v).saved, (std::vector<int>{v - 1, v}));
  }
  EXPECT_EQ(m.op(16).kind, OpKind::MSELoss);
  EXPECT_EQ(m.uniform_bytes(), 1u);
  EXPECT_FALSE(m.executable());  // 1-byte tensors are not whole floats
  EXPECT_EQ(num_edges(m.graph()), 16u);
}

TEST(Presets, ChainWithFloatUnitsRuns) {
  const Model m = make_preset("chain:8:256");
  EXPECT_TRUE(m.executable());
  EXPECT_EQ(m.op(3).shape, (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(m.op(3).bytes, 256u);
  EXPECT_EQ(m.op(8).bytes, 256u);  // the loss is padded to the unit
  EXPECT_EQ(m.op(3).param_bytes, (64u * 64u + 64u) * 4u);
}

TEST(Presets, MlpBytesAndFlops) {
  const Model m = make_preset("mlp:3:128:32");
  ASSERT_EQ(m.size(), 1 + 2 * 3 + 1);
  const Op& fc = m.op(1);
  EXPECT_EQ(fc.kind, OpKind::Linear);
  EXPECT_EQ(fc.bytes, 32u * 128u * 4u);
  EXPECT_DOUBLE_EQ(fc.fwd_flops, 2.0 * 32 * 128 * 128);
  EXPECT_DOUBLE_EQ(fc.bwd_flops, 4.0 * 32 * 128 * 128);
  EXPECT_EQ(fc.saved, std::vector<int>{0});
  EXPECT_EQ(m.op(2).saved, std::vector<int>{2});  // ReLU reads its output
  EXPECT_EQ(m.op(7).bytes, 4u);                   // scalar loss
  EXPECT_EQ(m.param_bytes(), 3u * (128u * 128u + 128u) * 4u);
  EXPECT_TRUE(m.executable());
}

TEST(Presets, TransformerIsADagWithResiduals) {
  const Model m = make_preset("transformer:2:32:8:2");
  ASSERT_EQ(m.size(), 1 + 2 * 12 + 3);
  const int rows = 16;
  const Op& res1 = m.op(6);
  EXPECT_EQ(res1.kind, OpKind::Add);
  EXPECT_EQ(res1.inputs, (std::vector<int>{0, 5}));  // skip edge from the block input
  const auto consumers = m.consumers(0);
  EXPECT_EQ(std::vector<int>(consumers.begin(), consumers.end()), (std::vector<int>{1, 6}));
  const Op& ln = m.op(1);
  EXPECT_EQ(ln.bytes, rows * 32u * 4u);     // y
  EXPECT_EQ(ln.aux_bytes, 2u * rows * 4u);  // mean and rstd per row, private to its backward
  EXPECT_EQ(ln.saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(5).aux_bytes, rows * 32u);  // the dropout mask, a byte per element
  EXPECT_EQ(m.op(8).shape, (std::vector<int64_t>{rows, 128}));  // MLP up-projection 4D
  EXPECT_EQ(m.op(9).saved, std::vector<int>{8});                // GELU reads its input
  EXPECT_FLOAT_EQ(m.op(5).dropout_p, 0.1f);
  EXPECT_EQ(m.op(m.loss()).kind, OpKind::SoftmaxCELoss);
}

TEST(Presets, Resnet18IsTorchvisions) {
  const Model m = make_preset("resnet:18");
  // Stem conv, bn, relu, pool; 8 blocks of (conv, bn, relu, conv, bn, add,
  // relu) and 3 shortcuts of (conv, bn); pool, flatten, fc, loss.
  ASSERT_EQ(m.size(), 1 + 4 + 8 * 7 + 3 * 2 + 4);
  EXPECT_EQ(m.op(4).shape, (std::vector<int64_t>{8, 64, 8, 8}));  // after the 3x3/2 max pool
  int gap = -1;
  for (int v = 0; v < m.size(); ++v)
    if (m.op(v).kind == OpKind::GlobalAvgPool) gap = v;
  ASSERT_GT(gap, 0);
  EXPECT_EQ(m.op(gap - 1).shape, (std::vector<int64_t>{8, 512, 1, 1}));  // 32 halved five times
  EXPECT_TRUE(m.op(gap + 1).view);                                     // flatten
  // torchvision's resnet18(num_classes=10) has 11,181,642 parameters; the
  // running statistics of its 4,800 batch-norm channels are 2 x 4,800 more floats.
  EXPECT_EQ(m.param_bytes(), 4u * (11'181'642 + 2 * 4'800));
  EXPECT_TRUE(m.executable());  // every kind of it has a CPU kernel (f32)
}

TEST(Presets, Resnet50IsTorchvisionsBottleneckNet) {
  const Model m = make_preset("resnet:50:64:32:2:10");
  // Stem conv, bn, relu, pool; 16 bottlenecks of (conv, bn, relu) x 2, conv,
  // bn, add, relu; a shortcut (conv, bn) in each stage's first block (the
  // first stage's too: 64 channels become 256); pool, flatten, fc, loss.
  ASSERT_EQ(m.size(), 1 + 4 + 16 * 10 + 4 * 2 + 4);
  int gap = -1;
  for (int v = 0; v < m.size(); ++v)
    if (m.op(v).kind == OpKind::GlobalAvgPool) gap = v;
  ASSERT_GT(gap, 0);
  EXPECT_EQ(m.op(gap - 1).shape, (std::vector<int64_t>{2, 2048, 1, 1}));  // 4 x 512 channels
  // The stride sits on the 3x3 convolution (torchvision's v1.5): layer2.0's
  // 1x1 conv1 keeps layer1's 8x8 image, its conv2 halves it.
  for (int v = 0; v < m.size(); ++v) {
    if (m.op(v).name == "layer2.0.conv1") EXPECT_EQ(m.op(v).shape, (std::vector<int64_t>{2, 128, 8, 8}));
    if (m.op(v).name == "layer2.0.conv2") EXPECT_EQ(m.op(v).shape, (std::vector<int64_t>{2, 128, 4, 4}));
  }
  // torchvision's resnet50(num_classes=10) has 23,528,522 parameters and
  // 26,560 batch-norm channels (two running statistics each).
  EXPECT_EQ(m.param_bytes(), 4u * (23'528'522 + 2 * 26'560));
  EXPECT_TRUE(m.executable());
}

TEST(Presets, BadSpecsSayWhatAndWhere) {
  EXPECT_EQ(error_of("chain:0"), "chain length N in 'chain:0' must be between 1 and 10000000, got 0");
  EXPECT_EQ(error_of("chain:x"), "chain length N in 'chain:x' must be an integer, got 'x'");
  EXPECT_EQ(error_of("mlp:2:-3"), "WIDTH in 'mlp:2:-3' must be between 1 and 1048576, got -3");
  EXPECT_NE(error_of("transformer:1:2:3:4:5").find("expected transformer:L[:D[:SEQ[:BATCH]]]"), std::string::npos);
  EXPECT_NE(error_of("vgg:5").find("unknown model spec 'vgg:5'"), std::string::npos);
  EXPECT_EQ(error_of("resnet:5"),
            "DEPTH in 'resnet:5' must be 10, 18, 34 (basic blocks), 50, 101 or 152 (bottlenecks), got 5");
  EXPECT_EQ(error_of("gpt:2:100:3"), "model spec 'gpt:2:100:3': width D 100 is not a multiple of the head count 3");
  EXPECT_EQ(error_of("gpt:2:96:3:8:1:i64"), "DTYPE in 'gpt:2:96:3:8:1:i64' must be f32, f16 or bf16, got 'i64'");
  EXPECT_NE(error_of("transformer:1:65536:1048576:65536").find("too large"), std::string::npos);
}
