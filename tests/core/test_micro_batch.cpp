// Micro-batches: one micro-batch of batch/K is the same model as the preset
// built at batch/K (op by op, and under every strategy), derived independently.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/analysis/micro_batch.h"
#include "core/analysis/micro_batch_sweep.h"
#include "core/analysis/step_memory.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
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

// The K sweep's rows (the CLI's table, the window's dialog): per K, the
// preset built at batch/K gives the peak; the step's FLOPs are K passes; the
// baseline is the same for every K.
TEST(MicroBatchSweep, RowsAreThePresetAtBatchOverK) {
  const Model m = make_preset("mlp:4:64:8");
  const auto rows = micro_batch_sweep(m, {"store-all", "sqrt"}, {1, 2, 4}, {.optimizer = Optimizer::Adam});
  ASSERT_EQ(rows.size(), 6u);
  const uint64_t baseline = step_memory(m, Optimizer::Adam, 0).baseline();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const int k = std::vector<int>{1, 2, 4}[i / 2];
    const char* spec = i % 2 ? "sqrt" : "store-all";
    const Model want = make_preset("mlp:4:64:" + std::to_string(8 / k));
    const Simulation s = simulate(want, make_strategy(spec)->schedule(want));
    SCOPED_TRACE(std::to_string(k) + " " + spec);
    EXPECT_EQ(rows[i].k, k);
    EXPECT_EQ(rows[i].batch, 8 / k);
    EXPECT_EQ(rows[i].strategy, spec);
    EXPECT_EQ(rows[i].peak_bytes, s.peak_bytes);
    EXPECT_EQ(rows[i].step_total_bytes, baseline + s.peak_bytes);
    EXPECT_DOUBLE_EQ(rows[i].step_flops, k * s.flops);
  }
  // Fewer activations per pass as K grows.
  EXPECT_LT(rows[4].peak_bytes, rows[2].peak_bytes);
  EXPECT_LT(rows[2].peak_bytes, rows[0].peak_bytes);
}

TEST(MicroBatchSweep, StopsWhenCancelledAndRefusesABadK) {
  const Model m = make_preset("mlp:4:64:8");
  std::atomic<bool> cancel{false};
  int calls = 0;
  const auto rows = micro_batch_sweep(m, {"store-all", "sqrt"}, {1, 2},
                                      {.cancel = &cancel, .progress = [&](int done, int total) {
                                         ++calls;
                                         EXPECT_EQ(total, 4);
                                         if (done == 1) cancel = true;
                                       }});
  EXPECT_EQ(rows.size(), 1u);
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(micro_batch_sweep(m, {"sqrt"}, {1, 3}), InputError);
}
