// Pipeline stages of a captured model (issue 31): a Llama-style decoder
// (tests/python/family_models.py's Llama with layers=4: RMSNorm, rotary
// embeddings, SwiGLU) captured by remat_capture from PyTorch 1.13 into
// tests/parallel/models/llama4-captured.json:
//   net = family_models.Llama(layers=4) after torch.manual_seed(0), ids of
//   (2, 8), cross-entropy over 16 labels; remat_capture.capture(...), save(...).
// Its four decoder layers are found from the graph as repeated blocks
// (block_chain, as the blocks strategy finds them), consecutive ones per
// stage; the embedding goes with the first stage, the norm, head and loss
// with the last. Tensor parallelism on it: test_tensor_split.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "core/parallel/block_stages.h"
#include "core/parallel/parallel_plan.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;
using remat::testing::input_error_of;

namespace {

const std::string kLlama = std::string(REMAT_PARALLEL_TEST_MODELS) + "/llama4-captured.json";

ParallelSpec pipeline(int p, int m, PipelineSchedule s = PipelineSchedule::OneFOneB) {
  ParallelSpec x;
  x.pp = p;
  x.micro_batches = m;
  x.schedule = s;
  return x;
}

uint64_t params_of(const Model& m, int first, int last) {
  uint64_t w = 0;
  for (int v = first; v <= last; ++v) w += m.op(v).param_bytes;
  return w;
}

}  // namespace

TEST(BlockStages, TheDecoderLayersAreTheRepeatedRun) {
  const Model m = load_model(kLlama);
  const std::vector<Block> run = repeated_block_run(m);
  ASSERT_EQ(run.size(), 4u);
  for (std::size_t i = 1; i < run.size(); ++i) {
    EXPECT_EQ(run[i].shape, run[0].shape);
    EXPECT_EQ(run[i].first, run[i - 1].last + 1);  // consecutive
    EXPECT_EQ(run[i].last - run[i].first, run[0].last - run[0].first);
  }
  // A layer's weights: 4 d x d attention projections and 3 d x 2d SwiGLU ones, two RMSNorm scales, f32 (d = 32).
  const uint64_t d = 32;
  EXPECT_EQ(params_of(m, run[1].first, run[1].last), 4 * (4 * d * d + 3 * 2 * d * d + 2 * d));
}

// One stage holding the whole run is the captured model itself, op for op:
// its store-all peak is the model's.
TEST(BlockStages, OneStageIsTheModel) {
  const Model m = load_model(kLlama);
  const std::vector<Block> run = repeated_block_run(m);
  const Model whole = block_stage_model(m, run, 0, 4, true, true);
  ASSERT_EQ(whole.size(), m.size());
  for (int v = 0; v < m.size(); ++v) {
    EXPECT_EQ(whole.op(v).kind, m.op(v).kind) << v;
    EXPECT_EQ(whole.op(v).shape, m.op(v).shape) << v;
    EXPECT_EQ(whole.op(v).bytes, m.op(v).bytes) << v;
    EXPECT_EQ(whole.op(v).saved, m.op(v).saved) << v;
  }
  const auto s = make_strategy("store-all");
  EXPECT_EQ(simulate(whole, s->schedule(whole)).peak_bytes, simulate(m, s->schedule(m)).peak_bytes);
  const ParallelReport r = simulate_parallel(kLlama, pipeline(1, 1), "store-all", {}, {});
  EXPECT_EQ(r.stages[0].micro_batch_peak, simulate(m, s->schedule(m)).peak_bytes);
  EXPECT_EQ(r.stages[0].weights, m.param_bytes());
}

TEST(BlockStages, FourStagesOfOneLayer) {
  const Model m = load_model(kLlama);
  const std::vector<Block> run = repeated_block_run(m);
  const ParallelReport r = simulate_parallel(kLlama, pipeline(4, 8), "store-all", {}, {});
  ASSERT_EQ(r.stages.size(), 4u);
  uint64_t weights = 0;
  for (const StageReport& s : r.stages) {
    EXPECT_EQ(s.chunks[0].first_block, s.stage);
    EXPECT_EQ(s.chunks[0].blocks, 1);
    EXPECT_EQ(s.in_flight, 4 - s.stage);  // 1F1B
    EXPECT_EQ(r.timelines[static_cast<std::size_t>(s.stage)].peak_bytes, s.peak());
    weights += s.weights;
  }
  EXPECT_EQ(weights, m.param_bytes());
  // The first stage adds the embedding, the last the norm and the head.
  EXPECT_EQ(r.stages[0].weights, params_of(m, 1, run[0].last));
  EXPECT_EQ(r.stages[1].weights, params_of(m, run[1].first, run[1].last));
  EXPECT_EQ(r.stages[3].weights, params_of(m, run[3].first, m.loss()));
  // A middle stage: the received (2, 8, 32) f32 activation, the layer's ops, the send.
  const Model mid = block_stage_model(m, run, 1, 1, false, false);
  EXPECT_EQ(mid.op(0).name, "recv");
  EXPECT_EQ(mid.op(0).bytes, 2u * 8 * 32 * 4);
  EXPECT_EQ(mid.size(), run[1].last - run[1].first + 1 + 2);
  EXPECT_EQ(mid.op(mid.loss()).name, "send");
  // Layers 1 and 2 are the same block: the same held bytes a micro-batch, under every strategy.
  for (const char* strategy : {"store-all", "blocks", "attention-core"}) {
    const ParallelReport x = simulate_parallel(kLlama, pipeline(4, 8), strategy, {}, {});
    EXPECT_EQ(x.stages[1].held_per_micro_batch, x.stages[2].held_per_micro_batch) << strategy;
    EXPECT_EQ(x.stages[1].micro_batch_peak, x.stages[2].micro_batch_peak) << strategy;
  }
}

// Tensor parallelism on model files: test_tensor_split.cpp.
TEST(BlockStages, UnsplittableModelsAreRefused) {
  const std::string plain = (std::filesystem::temp_directory_path() / "remat-no-blocks.json").string();
  std::ofstream(plain) << R"({"format": "remat-model", "version": 1, "name": "plain", "ops": [
    {"id":0,"name":"x","kind":"Input","shape":[4,8]},
    {"id":1,"name":"fc","kind":"Linear","inputs":[0],"shape":[4,8]},
    {"id":2,"name":"relu","kind":"ReLU","inputs":[1],"shape":[4,8]},
    {"id":3,"name":"loss","kind":"MSELoss","inputs":[2]}]})";
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(plain, pipeline(2, 2), "store-all", {}, {}); }),
            "--parallel: model 'plain' has no repeated blocks in its graph (no run of equal blocks between cuts, as a "
            "transformer's layers are): there is nothing to split into pipeline stages");
  // More stages than layers: the balanced split's own message.
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(kLlama, pipeline(8, 8), "store-all", {}, {}); }),
            "--parallel: 4 blocks cannot fill 8 pipeline stages (pp x V) with one block each");
}
