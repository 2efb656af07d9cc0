// Pipeline parallelism: in-flight micro-batches per stage and the bubble,
// against the papers that define the schedules:
//   - GPipe (Huang et al. 2019) keeps all M micro-batches' activations;
//     1F1B (Narayanan et al. 2021) keeps min(p - r, M) on stage r.
//   - Korthikanti et al. 2022, Eq. 5: under 1F1B the first stage holds p
//     micro-batches of L/p layers, (sbhL/t)(34 + 5as/h) with tensor and
//     sequence parallelism, whatever p; interleaved with m chunks multiplies
//     it by 1 + (p - 1)/(p m).
//   - Qi et al. 2023 ("Zero Bubble Pipeline Parallelism"), Table 2: peak
//     activations p M_B for 1F1B and ZB-H1, (2p - 1) M_B for ZB-H2; bubbles
//     (p - 1)(T_F + T_B + T_W), (p - 1)(T_F + T_B - T_W), (p - 1)(T_F + T_B - 2 T_W).
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/pipeline.h"
#include "core/parallel/rank_model.h"
#include "core/strategies/registry.h"
#include "tests/parallel/pipeline_spec.h"
#include "tests/support/input_error.h"

using namespace remat;
using remat::testing::pipeline_spec;

TEST(Pipeline, InFlightMicroBatchesPerStage) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 3, 8, 32}) {
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE("p=" + std::to_string(p) + " M=" + std::to_string(m) + " r=" + std::to_string(r));
        EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::GPipe, m), r), m);
        EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::OneFOneB, m), r), std::min(p - r, m));
        EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::ZbH1, m), r), std::min(p - r, m));
      }
    }
    // Qi et al.: the first worker's peak is p M_B under ZB-H1 and (2p - 1) M_B under ZB-H2.
    EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::ZbH1, 64), 0), p);
    EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::ZbH2, 64), 0), 2 * p - 1);
    EXPECT_EQ(in_flight(pipeline_spec(p, PipelineSchedule::ZbH2, 64), p - 1), 1);
  }
}

TEST(Pipeline, InterleavedFirstStageFactor) {
  for (int p : {2, 4, 8}) {
    for (int v : {1, 2, 3, 4}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " V=" + std::to_string(v));
      // Chunks of L/(pV) layers in flight on the first device; over L/p
      // layers' worth, Korthikanti et al.'s 1 + (p - 1)/(p m), m = V.
      const int chunks = in_flight(pipeline_spec(p, PipelineSchedule::Interleaved, 4 * p, v), 0);
      EXPECT_EQ(chunks * p, p * v * p + (p - 1) * p);  // chunks / (p V) = 1 + (p - 1)/(p V), times p V
      EXPECT_DOUBLE_EQ(static_cast<double>(chunks) / (p * v), 1 + (p - 1.0) / (p * v));
    }
  }
}

TEST(Pipeline, BubblesOfQiEtAlTable2) {
  const StageTimes t{.f = 1, .b = 1, .w = 1};
  const int p = 4;
  EXPECT_DOUBLE_EQ(bubble_seconds(pipeline_spec(p, PipelineSchedule::OneFOneB, 8), t), 3 * 3.0);
  EXPECT_DOUBLE_EQ(bubble_seconds(pipeline_spec(p, PipelineSchedule::GPipe, 8), t), 3 * 3.0);
  // With T_F = T_B = T_W, ZB-H1's bubble is a third of 1F1B's and ZB-H2 has none.
  EXPECT_DOUBLE_EQ(bubble_seconds(pipeline_spec(p, PipelineSchedule::ZbH1, 8), t), 3 * 1.0);
  EXPECT_DOUBLE_EQ(bubble_seconds(pipeline_spec(p, PipelineSchedule::ZbH2, 8), t), 0.0);
  // Narayanan et al. 2021: interleaving V chunks divides the bubble by V.
  EXPECT_DOUBLE_EQ(bubble_seconds(pipeline_spec(p, PipelineSchedule::Interleaved, 8, 2), t), 3 * 3.0 / 2);
  // 1F1B's step: (M + p - 1)(T_F + T_B + T_W); the bubble's share (p - 1)/(M + p - 1).
  EXPECT_DOUBLE_EQ(step_seconds(pipeline_spec(p, PipelineSchedule::OneFOneB, 8), t), (8 + 3) * 3.0);
}

TEST(Pipeline, BalancedStagesPutTheRemainderLast) {
  EXPECT_EQ(balanced_blocks(10, 4), (std::vector<int>{2, 2, 3, 3}));
  EXPECT_EQ(balanced_blocks(8, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(remat::testing::input_error_of([] { (void)balanced_blocks(3, 4); }),
            "--parallel: 3 blocks cannot fill 4 pipeline stages (pp x V) with one block each");
}

// Eq. 5: the first stage under 1F1B (tensor and sequence parallel, nothing
// recomputed) holds L layers' activations whatever p, plus what the paper
// names apart for the first stage: the embedding's dropout mask, sbh/t per
// micro-batch (its "sbhp/t"), and remat's count of the token ids (8 bytes
// each, b s) and of the LayerNorms' statistics (16 sb/t a layer).
TEST(Pipeline, FirstStageUnder1F1BIsIndependentOfP) {
  const int layers = 8, t = 2;
  const uint64_t h = 512, a = 8, s = 256, b = 2;
  const std::string model = "gpt:" + std::to_string(layers) + ":512:8:256:2:bf16";
  const double paper = static_cast<double>(s * b * h * layers) / t * (34 + 5.0 * a * s / h);
  for (int p : {2, 4, 8}) {  // p = 1 would make the first stage the last, with the vocabulary's logits
    SCOPED_TRACE("p=" + std::to_string(p));
    ParallelSpec x = pipeline_spec(p, PipelineSchedule::OneFOneB, 16);
    x.tp = t;
    x.sp = true;
    const ParallelReport r = simulate_parallel(model, x, "store-all", {}, {});
    const StageReport& first = r.stages[0];
    ASSERT_EQ(first.in_flight, p);
    const uint64_t total = static_cast<uint64_t>(p) * first.held_per_micro_batch;
    const uint64_t extras = static_cast<uint64_t>(p) * (s * b * h / t + 8 * s * b) + layers * 16 * s * b / t;
    EXPECT_EQ(total, static_cast<uint64_t>(paper) + extras);
    EXPECT_NEAR(static_cast<double>(total) / paper, 1.0, 0.02);
    // The stage's activations: p - 1 micro-batches waiting, one running its own step.
    EXPECT_EQ(first.activations, (p - 1) * first.held_per_micro_batch + first.micro_batch_peak);
  }
}

TEST(Pipeline, ZeroBubbleH2HoldsPMinusOneMoreOnTheFirstStage) {
  const std::string model = "gpt:8:256:4:64:2:bf16";
  const ParallelReport one = simulate_parallel(model, pipeline_spec(4, PipelineSchedule::OneFOneB, 16), "store-all", {}, {});
  const ParallelReport h1 = simulate_parallel(model, pipeline_spec(4, PipelineSchedule::ZbH1, 16), "store-all", {}, {});
  const ParallelReport h2 = simulate_parallel(model, pipeline_spec(4, PipelineSchedule::ZbH2, 16), "store-all", {}, {});
  const StageReport& s = one.stages[0];
  EXPECT_EQ(h1.stages[0].activations, s.activations);  // p M_B, as 1F1B
  EXPECT_EQ(h2.stages[0].activations, s.activations + 3 * s.held_per_micro_batch);  // (2p - 1) M_B
  // And the bubble they buy: ZB-H2's step is the shortest.
  EXPECT_LT(h1.step_s, one.step_s);
  EXPECT_LT(h2.step_s, h1.step_s);
}

TEST(Pipeline, StagesHoldTheirBlocksAndTheEnds) {
  const StackShape g = parse_stack_shape("gpt:6:256:4:64:2:bf16:1000");
  const ParallelReport r = simulate_parallel(g.spec, pipeline_spec(3, PipelineSchedule::OneFOneB, 6), "store-all", {}, {});
  ASSERT_EQ(r.stages.size(), 3u);
  // Weights: each stage's blocks, the first the embedding and position table,
  // the last ln_f and lm_head; together the whole model's.
  uint64_t weights = 0;
  for (const StageReport& s : r.stages) weights += s.weights;
  EXPECT_EQ(weights, rank_model(g, {.blocks = 6}).param_bytes());
  // The middle stage starts from the received activation (b, s, h) and keeps it for its first LayerNorm.
  const Model mid = rank_model(g, r.stages[1].chunks[0]);
  EXPECT_EQ(mid.op(0).name, "recv");
  EXPECT_EQ(mid.op(0).bytes, 2u * 2 * 64 * 256);
  EXPECT_EQ(mid.op(mid.loss()).name, "send");
  // Under 1F1B the last stage holds one micro-batch: its activations are its own step's peak.
  EXPECT_EQ(r.stages[2].in_flight, 1);
  EXPECT_EQ(r.stages[2].activations, r.stages[2].micro_batch_peak);
}

TEST(Pipeline, RecomputationLowersHeldAndCostsTime) {
  const std::string model = "gpt:8:256:4:64:2:bf16";
  const ParallelSpec x = pipeline_spec(2, PipelineSchedule::OneFOneB, 8);
  const ParallelReport all = simulate_parallel(model, x, "store-all", {}, {});
  const ParallelReport full = simulate_parallel(model, x, "blocks", {}, {});
  EXPECT_LT(full.stages[0].held_per_micro_batch, all.stages[0].held_per_micro_batch);
  EXPECT_EQ(all.stages[0].recompute_overhead, 0.0);
  EXPECT_GT(full.stages[0].recompute_overhead, 0.2);  // about a forward pass over forward + backward
  EXPECT_GT(full.step_s, all.step_s);
  // The bubble's share under 1F1B on the slowest stage: (p - 1)/(M + p - 1).
  EXPECT_DOUBLE_EQ(all.bubble_fraction, 1.0 / (8 + 1));
}

// Interleaving on the model: device r runs chunks r, r + p, ... of L/(pV)
// blocks; its first device holds 1 + (p - 1)/(p V) times what 1F1B's first
// stage holds (Korthikanti et al. 2022, section 4.2.3, m = V), up to the
// embedding's share, which 1F1B's first stage holds p times and interleaving's
// counts on each chunk (the report takes the largest chunk).
TEST(Pipeline, InterleavedFirstDeviceHoldsTheFactorMore) {
  const std::string model = "gpt:32:512:8:256:1:bf16";
  const int p = 2, v = 2;
  const ParallelReport plain = simulate_parallel(model, pipeline_spec(p, PipelineSchedule::OneFOneB, 8), "store-all", {}, {});
  const ParallelReport inter = simulate_parallel(model, pipeline_spec(p, PipelineSchedule::Interleaved, 8, v), "store-all", {}, {});
  const StageReport& s = inter.stages[0];
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].first_block, 0);
  EXPECT_EQ(s.chunks[1].first_block, 16);  // virtual stage p + 0: blocks 16..23
  EXPECT_EQ(s.chunks[1].blocks, 8);
  EXPECT_EQ(s.in_flight, p * v + p - 1);
  EXPECT_EQ(s.activations, (s.in_flight - 1) * s.held_per_micro_batch + s.micro_batch_peak);
  const double held_plain = static_cast<double>(plain.stages[0].in_flight) * plain.stages[0].held_per_micro_batch;
  const double held_inter = static_cast<double>(s.in_flight) * s.held_per_micro_batch;
  EXPECT_NEAR(held_inter / held_plain, 1 + (p - 1.0) / (p * v), 0.02);
  // And its bubble is 1/V of 1F1B's: (p - 1)(F + B + W)/V on a shorter step.
  EXPECT_LT(inter.bubble_fraction, plain.bubble_fraction);
}

// stages=N0:N1:... in place of the balanced split: a first stage given fewer
// blocks holds less for its p micro-batches (the usual answer to "the first
// stage runs out of memory first").
TEST(Pipeline, AStageListOverridesTheBalancedSplit) {
  const std::string model = "gpt:8:256:4:64:2:bf16";
  ParallelSpec x = pipeline_spec(2, PipelineSchedule::OneFOneB, 4);
  const ParallelReport balanced = simulate_parallel(model, x, "store-all", {}, {});
  x.stages = {3, 5};
  const ParallelReport given = simulate_parallel(model, x, "store-all", {}, {});
  ASSERT_EQ(given.stages.size(), 2u);
  EXPECT_EQ(given.stages[0].chunks[0].blocks, 3);
  EXPECT_EQ(given.stages[1].chunks[0].first_block, 3);
  EXPECT_EQ(given.stages[1].chunks[0].blocks, 5);
  // One block fewer on the first stage: each of its two micro-batches keeps one layer less.
  const StackShape g = parse_stack_shape(model);
  const uint64_t layer = rank_model(g, {.blocks = 2}).saved_bytes() - rank_model(g, {.blocks = 1}).saved_bytes();
  EXPECT_EQ(balanced.stages[0].held_per_micro_batch - given.stages[0].held_per_micro_batch, layer);
  using remat::testing::input_error_of;
  x.stages = {3, 4};
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(model, x, "store-all", {}, {}); }),
            "--parallel stages: they hold 7 blocks, the model has 8");
  x.stages = {8};
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(model, x, "store-all", {}, {}); }),
            "--parallel stages: 1 given, pp x V is 2 stages");
}
