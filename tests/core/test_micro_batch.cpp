// Micro-batches: one micro-batch of batch/K is the same model as the preset
// built at batch/K (op by op, and under every strategy), derived independently.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/micro_batch.h"
#include "core/presets.h"
#include "core/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

void expect_same_model(const Model& got, const Model& want) {
  ASSERT_EQ(got.size(), want.size());
  for (int v = 0; v < got.size(); ++v) {
    const Op& a = got.op(v);
    const Op& b = want.op(v);
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.aux_bytes, b.aux_bytes);
    EXPECT_EQ(a.param_bytes, b.param_bytes);
    EXPECT_EQ(a.view, b.view);
    EXPECT_EQ(a.storage, b.storage);
    EXPECT_EQ(a.saved, b.saved);
    EXPECT_DOUBLE_EQ(a.fwd_flops, b.fwd_flops);
    EXPECT_DOUBLE_EQ(a.bwd_flops, b.bwd_flops);
  }
  for (const char* spec : {"store-all", "recompute-all", "sqrt"}) {
    const Simulation x = simulate(got, make_strategy(spec)->schedule(got));
    const Simulation y = simulate(want, make_strategy(spec)->schedule(want));
    EXPECT_EQ(x.peak_bytes, y.peak_bytes) << spec;
    EXPECT_EQ(x.timeline, y.timeline) << spec;
  }
}

}  // namespace

TEST(MicroBatch, OneIsTheModelItself) {
  const Model m = make_preset("mlp:4:64:8");
  expect_same_model(micro_batch(m, 1), m);
}

TEST(MicroBatch, MlpHalfBatchIsTheHalfBatchPreset) {
  expect_same_model(micro_batch(make_preset("mlp:4:64:8"), 2), make_preset("mlp:4:64:4"));
}

TEST(MicroBatch, GptAttentionViewsAndDropoutScale) {
  // Attention's (batch x heads) leading dimension, views, masks and LayerNorm
  // statistics all follow the batch.
  expect_same_model(micro_batch(make_preset("gpt:2:64:4:32:4"), 4), make_preset("gpt:2:64:4:32:1"));
}

TEST(MicroBatch, ResnetBatchNormStatisticsDoNotScale) {
  expect_same_model(micro_batch(make_preset("resnet:18:16:32:8:10"), 4), make_preset("resnet:18:16:32:2:10"));
}

TEST(MicroBatch, KThatDoesNotDivideTheBatchIsRefused) {
  const Model m = make_preset("mlp:4:64:8");
  try {
    micro_batch(m, 3);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--micro-batches 3: does not divide the batch (8, the first dimension of the input [8,64])");
  }
  EXPECT_THROW(micro_batch(m, 0), InputError);
}
