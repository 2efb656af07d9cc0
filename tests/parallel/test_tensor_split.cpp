// Tensor and sequence parallelism on model files (core/parallel/tensor_split.h):
// each Linear's Megatron role and the heads found from the graph alone.
//
// tests/parallel/models/gpt4-written.json is gpt:4:128:8:32:2:bf16:50 as
// `remat model --model gpt:4:128:8:32:2:bf16:50 --write` writes it: a file
// the splitter reads like any other (it never reads names), whose ranks must
// be the preset's ranks (core/parallel/rank_model.cpp, written by hand from
// Megatron-LM's layout) op for op, and so every per-rank figure. Its
// vocabulary of 50 is not a multiple of 4: the head and the embedding are
// padded to ceil(V/t) as the presets are.
//
// tests/parallel/models/llama4-captured.json (test_block_stages.cpp says how
// it was captured) is a Llama-style decoder: separate wq, wk, wv, wo (d = 32,
// 4 heads of 8, rotary tables), RMSNorm written out (pow, mean, rsqrt, mul),
// SwiGLU (w1, w3 column-, w2 row-parallel, 2d = 64 features), a head over
// V = 64 classes; batch 2, sequence 8, f32.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/analysis/comparison.h"
#include "core/io/model_source.h"
#include "core/model/presets.h"
#include "core/parallel/block_stages.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/parallel_spec.h"
#include "core/parallel/rank_model.h"
#include "core/parallel/tensor_split.h"
#include "core/strategies/registry.h"
#include "tests/support/input_error.h"

using namespace remat;
using remat::testing::input_error_of;

namespace {

const std::string kModels = REMAT_PARALLEL_TEST_MODELS;
const std::string kGpt = kModels + "/gpt4-written.json";
const std::string kGptSpec = "gpt:4:128:8:32:2:bf16:50";
const std::string kLlama = kModels + "/llama4-captured.json";

Model file_rank(const std::string& path, const RankSlice& s) {
  const Model m = load_model(path);
  return file_rank_model(m, repeated_block_run(m), s, path);
}

RankSlice slice(int t, bool sp, int first, int blocks, bool first_stage, bool last_stage) {
  return {.tp = t, .sp = sp, .first_block = first, .blocks = blocks, .first_stage = first_stage, .last_stage = last_stage};
}

// The stage slices of a four-block model: whole, first, middle, last.
const RankSlice kShapes[] = {slice(1, false, 0, 4, true, true), slice(1, false, 0, 1, true, false),
                             slice(1, false, 1, 2, false, false), slice(1, false, 3, 1, false, true)};

uint64_t held(const Model& m, const std::string& strategy) {
  const auto s = make_strategy(strategy);
  const StrategyRun run = simulate_strategy(m, *s, strategy, {.limit = {}, .timelines = false, .time = std::nullopt});
  EXPECT_TRUE(run.ok()) << run.error;
  return held_after_forward(m, run.schedule);
}

}  // namespace

TEST(TensorSplit, WrittenGptRanksAreThePresetsOpForOp) {
  const StackShape g = parse_stack_shape(kGptSpec);
  for (int t : {1, 2, 4})
    for (bool sp : {false, true}) {
      if (t == 1 && sp) continue;
      for (RankSlice s : kShapes) {
        s.tp = t;
        s.sp = sp;
        SCOPED_TRACE("t=" + std::to_string(t) + (sp ? ",sp" : "") + " blocks " + std::to_string(s.first_block) + "+" +
                     std::to_string(s.blocks));
        const Model mine = file_rank(kGpt, s), preset = rank_model(g, s);
        ASSERT_EQ(mine.size(), preset.size());
        for (int v = 0; v < mine.size(); ++v) {
          const Op &a = mine.op(v), &b = preset.op(v);
          SCOPED_TRACE(b.name);
          EXPECT_EQ(a.name, b.name);
          EXPECT_EQ(a.kind, b.kind);
          EXPECT_EQ(a.inputs, b.inputs);
          EXPECT_EQ(a.shape, b.shape);
          EXPECT_EQ(a.dtype, b.dtype);
          EXPECT_EQ(a.bytes, b.bytes);
          EXPECT_EQ(a.aux_bytes, b.aux_bytes);
          EXPECT_EQ(a.param_bytes, b.param_bytes);
          EXPECT_EQ(a.saved, b.saved);
          EXPECT_EQ(a.fwd_flops, b.fwd_flops);
          EXPECT_EQ(a.bwd_flops, b.bwd_flops);
          EXPECT_EQ(*a.attrs, *b.attrs);
        }
      }
    }
}

// The teaching transformer (no attention: two Linears around a tanh, then
// the MLP) written to a file the same way: its ranks are the preset's too,
// the input given its shard under sp.
TEST(TensorSplit, WrittenTransformerRanksAreThePresetsOpForOp) {
  const std::string spec = "transformer:4:64:16:2";
  const std::string path = (std::filesystem::temp_directory_path() / "remat-tp-transformer4.json").string();
  save_json_model(make_preset(spec), path);
  const StackShape g = parse_stack_shape(spec);
  for (int t : {2, 4})
    for (bool sp : {false, true})
      for (RankSlice s : kShapes) {
        s.tp = t;
        s.sp = sp;
        SCOPED_TRACE("t=" + std::to_string(t) + (sp ? ",sp" : "") + " blocks " + std::to_string(s.first_block) + "+" +
                     std::to_string(s.blocks));
        const Model mine = file_rank(path, s), preset = rank_model(g, s);
        ASSERT_EQ(mine.size(), preset.size());
        for (int v = 0; v < mine.size(); ++v) {
          SCOPED_TRACE(preset.op(v).name);
          EXPECT_EQ(mine.op(v).kind, preset.op(v).kind);
          EXPECT_EQ(mine.op(v).inputs, preset.op(v).inputs);
          EXPECT_EQ(mine.op(v).shape, preset.op(v).shape);
          EXPECT_EQ(mine.op(v).bytes, preset.op(v).bytes);
          EXPECT_EQ(mine.op(v).aux_bytes, preset.op(v).aux_bytes);
          EXPECT_EQ(mine.op(v).param_bytes, preset.op(v).param_bytes);
          EXPECT_EQ(mine.op(v).saved, preset.op(v).saved);
        }
        EXPECT_EQ(mine.saved_bytes(), preset.saved_bytes());
      }
}

// Every per-rank figure of the report: the file's and the preset's are the same.
TEST(TensorSplit, WrittenGptPerRankFiguresAreThePresets) {
  for (const char* text : {"tp=2", "tp=4", "tp=2,sp", "tp=4,sp", "tp=2,sp,pp=2,micro-batches=4", "tp=4,pp=4,micro-batches=8",
                           "tp=2,pp=2,schedule=interleaved:2,micro-batches=4", "tp=2,sp,pp=2,schedule=zb-h1,micro-batches=4,dp=2,zero=3"})
    for (const char* strategy : {"store-all", "attention-core", "blocks"}) {
      SCOPED_TRACE(std::string(text) + " " + strategy);
      const ParallelSpec spec = parse_parallel_spec(text);
      const ParallelReport f = simulate_parallel(kGpt, spec, strategy, {}, {}), p = simulate_parallel(kGptSpec, spec, strategy, {}, {});
      ASSERT_EQ(f.stages.size(), p.stages.size());
      for (std::size_t i = 0; i < f.stages.size(); ++i) {
        const StageReport &a = f.stages[i], &b = p.stages[i];
        EXPECT_EQ(a.held_per_micro_batch, b.held_per_micro_batch);
        EXPECT_EQ(a.micro_batch_peak, b.micro_batch_peak);
        EXPECT_EQ(a.weights, b.weights);
        EXPECT_EQ(a.gradients, b.gradients);
        EXPECT_EQ(a.optimizer, b.optimizer);
        EXPECT_EQ(a.activations, b.activations);
        EXPECT_EQ(a.buffers, b.buffers);
        EXPECT_EQ(a.peak(), b.peak());
        EXPECT_EQ(a.recompute_overhead, b.recompute_overhead);
        EXPECT_EQ(a.times.f, b.times.f);
        EXPECT_EQ(a.times.b, b.times.b);
        EXPECT_EQ(a.times.w, b.times.w);
        EXPECT_EQ(f.timelines[i].peak_bytes, p.timelines[i].peak_bytes);
      }
      EXPECT_EQ(f.step_s, p.step_s);
      EXPECT_EQ(f.bubble_fraction, p.bubble_fraction);
    }
}

// Korthikanti et al. 2022, Table 2, per layer with 16-bit activations:
// tensor parallel sbh(10 + 24/t + 5as/(ht)), tensor + sequence parallel
// sbh/t (34 + 5as/h); remat adds the two LayerNorms' statistics, 16sb (over
// t with sp), as test_tensor_parallel.cpp derives. Measured on the file as
// a middle stage of two layers less one of one.
TEST(TensorSplit, WrittenGptPerLayerMatchesTable2) {
  const double s = 32, b = 2, h = 128, a = 8;
  const uint64_t sb = 64;
  for (int t : {2, 4})
    for (bool sp : {false, true}) {
      SCOPED_TRACE("t=" + std::to_string(t) + (sp ? ",sp" : ""));
      const Model two = file_rank(kGpt, slice(t, sp, 1, 2, false, false)), one = file_rank(kGpt, slice(t, sp, 1, 1, false, false));
      const uint64_t mine = two.saved_bytes() - one.saved_bytes();
      const double paper = sp ? s * b * h / t * (34 + 5 * a * s / h) : s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t));
      EXPECT_NEAR(mine / paper, 1.0, 0.02);
      EXPECT_EQ(mine, static_cast<uint64_t>(paper) + (sp ? 16 * sb / t : 16 * sb));
      EXPECT_EQ(held(two, "store-all") - held(one, "store-all"), mine);
    }
}

namespace {

// Which ops of a Llama layer a rank holds whole under tp (no sp), by name,
// from Megatron's layout: the norms, the views of a norm's output that the
// column-parallel Linears read, the row-parallel Linears' outputs and the
// residual sums; everything between a column- and a row-parallel Linear is
// divided by t.
bool whole_in_llama(const std::string& n) {
  for (const char* suffix : {".wq.reshape", ".wk.reshape", ".wv.reshape", ".w1.reshape", ".w3.reshape", ".wo.linear",
                             ".wo.reshape.1", ".w2.linear", ".w2.reshape.1", ".add.2", ".add.3"})
    if (n.ends_with(suffix)) return true;
  return n.find("norm") != std::string::npos || n == "recv" || n == "send";
}

}  // namespace

TEST(TensorSplit, LlamaCaptureUnderTp2) {
  // Weights: per layer wq, wk, wv, wo (d x d) and w1, w3, w2 (d x 2d) halved,
  // the two RMSNorm scales (d) whole; the embedding and the head over V = 64
  // halved (vocabulary-parallel), the final norm whole. f32.
  const uint64_t d = 32, v = 64, layer = 4 * d * d / 2 + 3 * d * 2 * d / 2 + 2 * d;
  const ParallelReport whole = simulate_parallel(kLlama, parse_parallel_spec("tp=2"), "store-all", {}, {});
  EXPECT_EQ(whole.stages[0].weights, 4 * (v * d / 2 + 4 * layer + d + d * v / 2));
  EXPECT_EQ(whole.stages[0].weights, 91264u);

  // A layer's activations, op by op: the capture's bytes, halved between the
  // column- and the row-parallel Linears.
  const Model full = file_rank(kLlama, slice(1, false, 1, 1, false, false)), rank = file_rank(kLlama, slice(2, false, 1, 1, false, false));
  ASSERT_EQ(rank.size(), full.size());
  uint64_t divided = 0, scalars = 0;
  std::set<int> counted;
  for (int u = 0; u < full.size(); ++u) {
    const Op &a = full.op(u), &r = rank.op(u);
    SCOPED_TRACE(a.name);
    ASSERT_EQ(r.name, a.name);
    const bool w = whole_in_llama(a.name);
    EXPECT_EQ(r.bytes, w ? a.bytes : a.bytes / 2);
    // Every Linear's weights are halved, the row-parallel ones' too (their outputs are whole).
    EXPECT_EQ(r.param_bytes, w && a.kind != OpKind::Linear ? a.param_bytes : a.param_bytes / 2);
    if (a.kind == OpKind::DivConst) {  // the capture's wrapped scalar (aux 8), the same on every rank
      EXPECT_EQ(a.aux_bytes, 8u);
      EXPECT_EQ(r.aux_bytes, 8u);
      scalars += 8;
    } else {
      EXPECT_EQ(r.aux_bytes, w ? a.aux_bytes : a.aux_bytes / 2);
      if (!w) divided += a.aux_bytes;
    }
    for (int s : a.saved)
      if (counted.insert(full.storage(s)).second && !whole_in_llama(full.op(full.storage(s)).name))
        divided += full.op(full.storage(s)).bytes;
  }
  EXPECT_GT(divided, 0u);
  EXPECT_EQ(rank.saved_bytes(), full.saved_bytes() - divided / 2);
  // With sp every activation of the layer is divided (the norms' over the
  // sequence), but the wrapped scalars.
  const Model sp = file_rank(kLlama, slice(2, true, 1, 1, false, false));
  EXPECT_EQ(sp.saved_bytes(), (full.saved_bytes() - scalars) / 2 + scalars);
  EXPECT_EQ(sp.op(0).shape, (Shape{2, 4, 32}));  // recv: half the sequence
}

// Tensor with pipeline parallelism: two stages of two layers, each stage's
// rank holding its half of the stage's weights; under sp the second stage
// receives half the sequence and the all-gather buffer is one whole (2, 8, 32).
TEST(TensorSplit, LlamaCaptureTp2WithPp2) {
  const uint64_t d = 32, v = 64, layer = 4 * d * d / 2 + 3 * d * 2 * d / 2 + 2 * d;
  for (const char* text : {"tp=2,pp=2,micro-batches=4", "tp=2,sp,pp=2,micro-batches=4"}) {
    SCOPED_TRACE(text);
    const ParallelSpec spec = parse_parallel_spec(text);
    const ParallelReport r = simulate_parallel(kLlama, spec, "store-all", {}, {});
    ASSERT_EQ(r.stages.size(), 2u);
    EXPECT_EQ(r.stages[0].weights, 4 * (v * d / 2 + 2 * layer));
    EXPECT_EQ(r.stages[1].weights, 4 * (2 * layer + d + d * v / 2));
    EXPECT_EQ(r.stages[0].in_flight, 2);
    EXPECT_EQ(r.stages[1].in_flight, 1);
    EXPECT_EQ(r.stages[0].buffers, spec.sp ? 2u * 8 * 32 * 4 : 0u);
    for (int s = 0; s < 2; ++s) {
      const Model m = file_rank(kLlama, r.stages[static_cast<std::size_t>(s)].chunks[0]);
      EXPECT_EQ(r.stages[static_cast<std::size_t>(s)].held_per_micro_batch, held(m, "store-all"));
      EXPECT_EQ(r.stages[static_cast<std::size_t>(s)].activations,
                r.stages[static_cast<std::size_t>(s)].held_per_micro_batch * (r.stages[static_cast<std::size_t>(s)].in_flight - 1) +
                    r.stages[static_cast<std::size_t>(s)].micro_batch_peak);
    }
    const Model second = file_rank(kLlama, r.stages[1].chunks[0]);
    EXPECT_EQ(second.op(0).name, "recv");
    EXPECT_EQ(second.op(0).bytes, spec.sp ? 2u * 4 * 32 * 4 : 2u * 8 * 32 * 4);
    // Half the weights of tp=1's stages, but the whole norms.
    const ParallelReport one = simulate_parallel(kLlama, parse_parallel_spec("pp=2,micro-batches=4"), "store-all", {}, {});
    EXPECT_EQ(one.stages[0].weights - r.stages[0].weights, 4 * (v * d / 2 + 2 * (layer - 2 * d)));
    EXPECT_LT(r.stages[0].held_per_micro_batch, one.stages[0].held_per_micro_batch);
  }
  // Four stages of one layer: the middle two are the same block, the same
  // held bytes under every strategy.
  for (const char* strategy : {"store-all", "blocks", "attention-core"}) {
    const ParallelReport x = simulate_parallel(kLlama, parse_parallel_spec("tp=2,sp,pp=4,micro-batches=8"), strategy, {}, {});
    EXPECT_EQ(x.stages[1].held_per_micro_batch, x.stages[2].held_per_micro_batch) << strategy;
    EXPECT_EQ(x.stages[1].micro_batch_peak, x.stages[2].micro_batch_peak) << strategy;
  }
}

TEST(TensorSplit, RefusalsNameTheOp) {
  const std::string at = "--parallel tp=8 on '" + kLlama + "': ";
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(kLlama, parse_parallel_spec("tp=8"), "store-all", {}, {}); }),
            at + "op 'blocks.0.reshape' (Reshape [2,8,4,8]): tp=8 does not divide its axis 2 (4), across which it would cut "
                 "the tensor divided along axis 2 by the column-parallel 'blocks.0.wq.linear': each rank must hold whole heads");
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(kLlama, parse_parallel_spec("tp=3"), "store-all", {}, {}); }),
            "--parallel tp=3 on '" + kLlama +
                "': op 'blocks.0.wq.linear' (Linear [16,32]): tp=3 does not divide its 32 output features (a "
                "column-parallel Linear: each rank computes a t-th of them)");
  // The sequence (8) under sp with t = 16 is refused before the heads.
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(kLlama, parse_parallel_spec("tp=16,sp"), "store-all", {}, {}); }),
            "--parallel tp=16,sp on '" + kLlama +
                "': tp=16 does not divide the sequence length 8 (axis 1 of the blocks' input op 'tok.embedding' (Embedding "
                "[2,8,32]))");

  // Blocks without Megatron's structure: norm and GELU around a residual (no
  // Linear), and a Linear and ReLU (column-parallel with nothing to bring its
  // split back whole).
  const auto dir = std::filesystem::temp_directory_path();
  const std::string no_linear = (dir / "remat-tp-no-linear.json").string(), no_row = (dir / "remat-tp-no-row.json").string();
  std::ofstream(no_linear) << R"({"format": "remat-model", "version": 1, "name": "no-linear", "ops": [
    {"id":0,"name":"x","kind":"Input","shape":[4,8,16]},
    {"id":1,"name":"b0.ln","kind":"LayerNorm","inputs":[0]},
    {"id":2,"name":"b0.gelu","kind":"GELU","inputs":[1]},
    {"id":3,"name":"b0.res","kind":"Add","inputs":[0,2]},
    {"id":4,"name":"b1.ln","kind":"LayerNorm","inputs":[3]},
    {"id":5,"name":"b1.gelu","kind":"GELU","inputs":[4]},
    {"id":6,"name":"b1.res","kind":"Add","inputs":[3,5]},
    {"id":7,"name":"head","kind":"Linear","inputs":[6],"shape":[4,8,10]},
    {"id":8,"name":"loss","kind":"SoftmaxCELoss","inputs":[7]}]})";
  std::ofstream(no_row) << R"({"format": "remat-model", "version": 1, "name": "no-row", "ops": [
    {"id":0,"name":"x","kind":"Input","shape":[4,16]},
    {"id":1,"name":"b0.fc","kind":"Linear","inputs":[0],"shape":[4,16]},
    {"id":2,"name":"b0.relu","kind":"ReLU","inputs":[1]},
    {"id":3,"name":"b1.fc","kind":"Linear","inputs":[2],"shape":[4,16]},
    {"id":4,"name":"b1.relu","kind":"ReLU","inputs":[3]},
    {"id":5,"name":"b2.fc","kind":"Linear","inputs":[4],"shape":[4,16]},
    {"id":6,"name":"b2.relu","kind":"ReLU","inputs":[5]},
    {"id":7,"name":"loss","kind":"MSELoss","inputs":[6]}]})";
  const std::string megatron =
      ": tensor parallelism divides a block's column-parallel Linears (attention Q, K, V, the MLP's up and gate) and brings "
      "their split back whole with row-parallel ones (the attention's output projection, the MLP's down), as Megatron-LM "
      "does, and this block has no such pair";
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(no_linear, parse_parallel_spec("tp=2"), "store-all", {}, {}); }),
            "--parallel tp=2 on '" + no_linear + "': block 0 ('b0.ln' .. 'b0.res') has no Linear" + megatron);
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(no_row, parse_parallel_spec("tp=2"), "store-all", {}, {}); }),
            "--parallel tp=2 on '" + no_row + "': block 0 ('b0.fc' .. 'b0.relu') has no row-parallel Linear" + megatron);
  // Pipeline stages alone (tp=1) still take them.
  EXPECT_EQ(simulate_parallel(no_linear, parse_parallel_spec("pp=2"), "store-all", {}, {}).stages.size(), 2u);
}

namespace {

// Which ops of a captured nanoGPT layer a rank holds whole under tp (no sp):
// the LayerNorms, the views of their outputs that c_attn and mlp.0 read, the
// row-parallel Linears' outputs, the dropouts after them and the residual
// sums; between c_attn (mlp.0) and c_proj (mlp.2) everything is divided.
bool whole_in_nanogpt(const std::string& n) {
  for (const char* suffix : {".c_attn.reshape", ".mlp.0.reshape", ".c_proj.linear", ".c_proj.reshape.1", ".mlp.2.linear",
                             ".mlp.2.reshape.1", ".add", ".add.1"})
    if (n.ends_with(suffix)) return true;
  return n.find("ln_") != std::string::npos || n.find("resid_dropout") != std::string::npos ||
         n.find("mlp.3") != std::string::npos || n == "recv" || n == "send";
}

}  // namespace

// A nanoGPT captured from PyTorch (tests/parallel/models/nanogpt3.py says
// how): its fused c_attn (one (64, 64) -> 192 Linear, viewed to (2, 32, 192)
// and split in three) is column-parallel with each third divided, so each
// rank's q, k and v are its 4/t heads; the causal mask buffer and the
// 1/sqrt(hs) scalar the capture keeps in aux are the same on every rank.
TEST(TensorSplit, NanoGptCapture) {
  const std::string gpt = kModels + "/nanogpt3-captured.json";
  const uint64_t d = 64, v = 96, s = 32;
  for (uint64_t t : {1, 2, 4}) {
    SCOPED_TRACE("t=" + std::to_string(t));
    const uint64_t layer = (d * 3 * d + 3 * d) / t + d * d / t + d + (d * 4 * d + 4 * d) / t + 4 * d * d / t + d + 4 * d;
    const ParallelReport r = simulate_parallel(gpt, parse_parallel_spec("tp=" + std::to_string(t)), "store-all", {}, {});
    // The token embedding and head vocabulary-parallel, the position table and norms whole.
    EXPECT_EQ(r.stages[0].weights, 4 * (v * d / t + s * d + 3 * layer + 2 * d + d * v / t));
  }
  const Model full = file_rank(gpt, slice(1, false, 1, 1, false, false)), rank = file_rank(gpt, slice(2, false, 1, 1, false, false));
  ASSERT_EQ(rank.size(), full.size());
  uint64_t divided = 0, constants = 0;
  std::set<int> counted;
  for (int u = 0; u < full.size(); ++u) {
    const Op &a = full.op(u), &r = rank.op(u);
    SCOPED_TRACE(a.name);
    ASSERT_EQ(r.name, a.name);
    const bool w = whole_in_nanogpt(a.name);
    EXPECT_EQ(r.bytes, w ? a.bytes : a.bytes / 2);
    if (a.kind == OpKind::MulConst || a.kind == OpKind::MaskedFill) {  // the scalar (8) and the mask buffer (32 x 32 bools)
      EXPECT_EQ(a.aux_bytes, a.kind == OpKind::MulConst ? 8u : 1024u);
      EXPECT_EQ(r.aux_bytes, a.aux_bytes);
      constants += a.aux_bytes;
    } else {
      EXPECT_EQ(r.aux_bytes, w ? a.aux_bytes : a.aux_bytes / 2);
      if (!w) divided += a.aux_bytes;
    }
    for (int x : a.saved)
      if (counted.insert(full.storage(x)).second && !whole_in_nanogpt(full.op(full.storage(x)).name))
        divided += full.op(full.storage(x)).bytes;
  }
  EXPECT_EQ(rank.saved_bytes(), full.saved_bytes() - divided / 2);
  const Model sp = file_rank(gpt, slice(2, true, 1, 1, false, false));
  EXPECT_EQ(sp.saved_bytes(), (full.saved_bytes() - constants) / 2 + constants);
  // Its 4 heads: tp=8 cuts across them.
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(gpt, parse_parallel_spec("tp=8"), "store-all", {}, {}); }),
            "--parallel tp=8 on '" + gpt +
                "': op 'h.0.attn.reshape' (Reshape [2,32,4,16]): tp=8 does not divide its axis 2 (4), across which it would "
                "cut the tensor divided along axis 2 by the column-parallel 'h.0.attn.c_attn.linear': each rank must hold "
                "whole heads");
}

// PyTorch 2's scaled_dot_product_attention as one Attention op (q, k, v
// sliced from a fused qkv, viewed to (2, 4 heads, 16, 8)): each rank's op
// reads its heads; written here as a capture would write it.
TEST(TensorSplit, FusedAttentionOpReadsItsHeads) {
  const std::string path = (std::filesystem::temp_directory_path() / "remat-tp-sdpa.json").string();
  {
    std::ofstream out(path);
    out << R"({"format": "remat-model", "version": 1, "name": "sdpa3", "ops": [
    {"id":0,"name":"x","kind":"Input","shape":[2,16,32]})";
    int x = 0, id = 1;
    auto op = [&](const std::string& fields) {
      out << ",\n    {\"id\":" << id << "," << fields << "}";
      return id++;
    };
    for (int b = 0; b < 3; ++b) {
      const std::string p = "\"b" + std::to_string(b) + ".";
      const int h = op("\"name\":" + p + "ln\",\"kind\":\"LayerNorm\",\"inputs\":[" + std::to_string(x) + "]");
      const int qkv = op("\"name\":" + p + "qkv\",\"kind\":\"Linear\",\"inputs\":[" + std::to_string(h) + "],\"shape\":[2,16,96]");
      std::string heads;
      for (int i = 0; i < 3; ++i) {
        const int s = op("\"name\":" + p + "split" + std::to_string(i) + "\",\"kind\":\"Slice\",\"inputs\":[" + std::to_string(qkv) +
                         "],\"axis\":2,\"start\":" + std::to_string(32 * i) + ",\"end\":" + std::to_string(32 * i + 32));
        const int r = op("\"name\":" + p + "view" + std::to_string(i) + "\",\"kind\":\"Reshape\",\"inputs\":[" + std::to_string(s) +
                         "],\"shape\":[2,16,4,8]");
        heads += (i ? "," : "") + std::to_string(op("\"name\":" + p + "heads" + std::to_string(i) +
                                                    "\",\"kind\":\"Transpose\",\"inputs\":[" + std::to_string(r) + "],\"perm\":[0,2,1,3]"));
      }
      const int a = op("\"name\":" + p + "sdpa\",\"kind\":\"Attention\",\"inputs\":[" + heads + "],\"causal\":true");
      const int t = op("\"name\":" + p + "y.t\",\"kind\":\"Transpose\",\"inputs\":[" + std::to_string(a) + "],\"perm\":[0,2,1,3]");
      const int y = op("\"name\":" + p + "y\",\"kind\":\"Reshape\",\"inputs\":[" + std::to_string(t) + "],\"shape\":[2,16,32],\"copy\":true");
      const int proj = op("\"name\":" + p + "proj\",\"kind\":\"Linear\",\"inputs\":[" + std::to_string(y) + "],\"shape\":[2,16,32]");
      x = op("\"name\":" + p + "res\",\"kind\":\"Add\",\"inputs\":[" + std::to_string(x) + "," + std::to_string(proj) + "]");
    }
    op("\"name\":\"loss\",\"kind\":\"MSELoss\",\"inputs\":[" + std::to_string(x) + "]");
    out << "]}\n";
  }
  const uint64_t d = 32;
  for (uint64_t t : {1, 2, 4}) {
    SCOPED_TRACE("t=" + std::to_string(t));
    // Per layer: the LayerNorm (2d) and proj's bias (d) whole, qkv (3d x d + 3d) and proj's matrix divided.
    const ParallelReport r = simulate_parallel(path, parse_parallel_spec("tp=" + std::to_string(t)), "store-all", {}, {});
    EXPECT_EQ(r.stages[0].weights, 4 * 3 * (2 * d + (3 * d * d + 3 * d) / t + d * d / t + d));
  }
  const Model full = file_rank(path, slice(1, false, 0, 3, true, true)), rank = file_rank(path, slice(2, false, 0, 3, true, true));
  ASSERT_EQ(rank.size(), full.size());
  for (int u = 0; u < full.size(); ++u)
    if (full.op(u).kind == OpKind::Attention) {
      EXPECT_EQ(rank.op(u).shape, (Shape{2, 2, 16, 8}));
      EXPECT_EQ(rank.op(u).aux_bytes, full.op(u).aux_bytes / 2);  // the logsumexp of its heads' rows
    }
  EXPECT_EQ(input_error_of([&] { (void)simulate_parallel(path, parse_parallel_spec("tp=8"), "store-all", {}, {}); }),
            "--parallel tp=8 on '" + path +
                "': op 'b0.view0' (Reshape [2,16,4,8]): tp=8 does not divide its axis 2 (4), across which it would cut the "
                "tensor divided along axis 2 by the column-parallel 'b0.qkv': each rank must hold whole heads");
}
