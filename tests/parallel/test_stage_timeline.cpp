// Per-stage memory timelines: the schedule played in unit slots
// (pipeline_grid.h) and each stage's memory over it (stage_timeline.h),
// against the counts the papers give:
//   - GPipe (Huang et al. 2019) holds all M micro-batches on every stage;
//     1F1B (Narayanan et al. 2021) min(p - r, M) on stage r; both take
//     2(M + p - 1) slots of one F or B each.
//   - Megatron-LM's interleaved order holds 2(p - r - 1) + (V - 1)p + 1
//     chunks on device r (at most M V).
//   - Qi et al. 2023: ZB-H1 holds 1F1B's p - r, ZB-H2 2(p - r) - 1 (the first
//     worker's (2p - 1) M_B); stage r of ZB-H1 leaves its first r weight
//     passes for the end, as the authors' DeepSpeed schedule does.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/parallel/parallel_plan.h"
#include "core/parallel/pipeline_grid.h"
#include "core/parallel/rank_model.h"
#include "core/parallel/stage_timeline.h"
#include "tests/parallel/pipeline_spec.h"
#include "tests/support/input_error.h"

using namespace remat;
using remat::testing::pipeline_spec;

namespace {


// Every stage's chunk memory 1 byte held, so the timeline counts micro-batches.
int most_waiting(const PipelineGrid& g, int r, int chunks) {
  return stage_timeline(g, r, 0, std::vector<ChunkMemory>(static_cast<std::size_t>(chunks), {1, 1, 1, 0}))
      .most_waiting_backward();
}

// Each pass once, and after what it needs: F(i) on virtual stage v after F(i)
// on v - 1; B(i) after F(i) on its own stage and B(i) on v + 1; W(i) after B(i).
void expect_valid(const PipelineGrid& g, const ParallelSpec& p) {
  const int stages = p.pp * p.chunks;
  std::map<std::tuple<char, int, int>, int> slot;  // (pass, virtual stage, micro-batch)
  for (int r = 0; r < g.devices; ++r) {
    int last = -1;
    for (const PipelinePass& x : g.passes[static_cast<std::size_t>(r)]) {
      EXPECT_GT(x.slot, last) << "device " << r << ": two passes in one slot";
      last = x.slot;
      EXPECT_TRUE(slot.emplace(std::make_tuple(pass_letter(x.kind), x.chunk * p.pp + r, x.micro_batch), x.slot).second);
    }
  }
  const bool split = p.schedule == PipelineSchedule::ZbH1 || p.schedule == PipelineSchedule::ZbH2;
  EXPECT_EQ(slot.size(), static_cast<std::size_t>(stages * p.micro_batches * (split ? 3 : 2)));
  for (int v = 0; v < stages; ++v)
    for (int i = 0; i < p.micro_batches; ++i) {
      const int f = slot.at({'F', v, i}), b = slot.at({'B', v, i});
      if (v > 0) EXPECT_GT(f, slot.at({'F', v - 1, i}));
      EXPECT_GT(b, f);
      if (v < stages - 1) EXPECT_GT(b, slot.at({'B', v + 1, i}));
      if (split) EXPECT_GT(slot.at({'W', v, i}), b);
    }
}

}  // namespace

TEST(StageTimeline, MicroBatchesInFlightAsThePapersCountThem) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 3, 8, 32}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " M=" + std::to_string(m));
      const auto gpipe = pipeline_spec(p, PipelineSchedule::GPipe, m), one = pipeline_spec(p, PipelineSchedule::OneFOneB, m),
                 h1 = pipeline_spec(p, PipelineSchedule::ZbH1, m), h2 = pipeline_spec(p, PipelineSchedule::ZbH2, m);
      const PipelineGrid g_gpipe = pipeline_grid(gpipe), g_one = pipeline_grid(one), g_h1 = pipeline_grid(h1),
                         g_h2 = pipeline_grid(h2);
      for (const auto& [x, g] : {std::pair{gpipe, g_gpipe}, {one, g_one}, {h1, g_h1}, {h2, g_h2}}) expect_valid(g, x);
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE("r=" + std::to_string(r));
        EXPECT_EQ(most_waiting(g_gpipe, r, 1), m);
        EXPECT_EQ(most_waiting(g_one, r, 1), std::min(p - r, m));
        EXPECT_EQ(most_waiting(g_h1, r, 1), std::min(p - r, m));
        EXPECT_EQ(most_waiting(g_h2, r, 1), std::min(2 * (p - r) - 1, m));
        // And the report's in-flight column is the same count.
        for (const auto& x : {gpipe, one, h1, h2}) EXPECT_EQ(most_waiting(pipeline_grid(x), r, 1), in_flight(x, r));
      }
      // One F and one B a slot: GPipe and 1F1B both take (M + p - 1) slots of each.
      EXPECT_EQ(g_gpipe.length, 2 * (m + p - 1));
      EXPECT_EQ(g_one.length, 2 * (m + p - 1));
    }
  }
}

TEST(StageTimeline, InterleavedChunksInFlight) {
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 4 * p}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " V=" + std::to_string(v) + " M=" + std::to_string(m));
        const auto x = pipeline_spec(p, PipelineSchedule::Interleaved, m, v);
        const PipelineGrid g = pipeline_grid(x);
        expect_valid(g, x);
        for (int r = 0; r < p; ++r) EXPECT_EQ(most_waiting(g, r, v), std::min(2 * (p - r - 1) + (v - 1) * p + 1, m * v));
      }
    }
  }
}

// ZB-H1 (Qi et al.'s DeepSpeed schedule): stage r runs r backwards without
// their W, then F B W by turns, and the r Ws it left at the end; on the last
// stage, F B by turns with the p - 1 Ws after.
TEST(StageTimeline, ZeroBubbleLeavesStageRsFirstRWeightPassesForTheEnd) {
  const int p = 4, m = 8;
  const PipelineGrid g = pipeline_grid(pipeline_spec(p, PipelineSchedule::ZbH1, m));
  // Qi et al.'s bubble (p - 1)(T_F + T_B - T_W): p - 1 slots with unit passes,
  // after the 3M of each stage's own.
  EXPECT_EQ(g.length, 3 * m + p - 1);
  for (int r = 0; r < p; ++r) {
    const auto& passes = g.passes[static_cast<std::size_t>(r)];
    int trailing = 0;
    for (auto it = passes.rbegin(); it != passes.rend() && it->kind == PassKind::WeightGrad; ++it) ++trailing;
    EXPECT_EQ(trailing, r + 1) << "stage " << r;  // the r left, after the last B's own
    EXPECT_EQ(most_waiting(g, r, 1), p - r);
    const std::vector<ChunkMemory> w{{.held = 0, .forward_peak = 0, .peak = 0, .weight_grad_held = 1}};
    const StageTimeline tl = stage_timeline(g, r, 0, w);
    // Once a B ends: the r left and its own, until its W runs.
    EXPECT_EQ(*std::max_element(tl.waiting_weight_grad.begin(), tl.waiting_weight_grad.end()), r + 1);
  }
}

// The stage's timeline on a model, with the strategy's own figures: under
// GPipe and 1F1B its peak is the table's, (in-flight - 1) x held + one
// micro-batch's peak over the model states, exactly; under ZB-H1 the r
// weight passes waiting add r x weight_grad_held, and a backward holds at
// least the W's tensors (under `blocks`, more than its own peak).
TEST(StageTimeline, StageMemoryOverTheScheduleOnAModel) {
  const std::string model = "gpt:8:256:4:64:2:bf16";
  const int p = 4, m = 8;
  for (const char* strategy : {"store-all", "blocks", "attention-core"}) {
    for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
      SCOPED_TRACE(std::string(strategy) + " " + schedule_name(pipeline_spec(p, s, m)));
      const ParallelReport r = simulate_parallel(model, pipeline_spec(p, s, m), strategy, {}, {});
      ASSERT_EQ(r.timelines.size(), static_cast<std::size_t>(p));
      for (const StageReport& st : r.stages) {
        const StageTimeline& tl = r.timelines[static_cast<std::size_t>(st.stage)];
        EXPECT_EQ(tl.peak_bytes, st.peak());
        EXPECT_EQ(tl.baseline, st.weights + st.gradients + st.optimizer + st.buffers);
        EXPECT_EQ(tl.most_waiting_backward(), st.in_flight);
        const auto at = r.grid.at(st.stage);
        const int k = at[static_cast<std::size_t>(tl.peak_slot)];
        ASSERT_GE(k, 0);
        const PipelinePass& x = r.grid.passes[static_cast<std::size_t>(st.stage)][static_cast<std::size_t>(k)];
        // The peak: a backward with in-flight - 1 others waiting, or, where a
        // micro-batch peaks in its forward (the last stage's logits), the
        // forward that fills the stage.
        const int waiting = tl.waiting_backward[static_cast<std::size_t>(tl.peak_slot)];
        if (x.kind == PassKind::Backward) EXPECT_EQ(waiting, st.in_flight - 1);
        else EXPECT_EQ(waiting, st.in_flight);
        EXPECT_NE(x.kind, PassKind::WeightGrad);
      }
    }
    const ParallelReport h1 = simulate_parallel(model, pipeline_spec(p, PipelineSchedule::ZbH1, m), strategy, {}, {});
    for (const StageReport& st : h1.stages) {
      const ChunkMemory& c = st.chunk_memory[0];
      EXPECT_EQ(h1.timelines[static_cast<std::size_t>(st.stage)].peak_bytes,
                st.weights + st.gradients + st.optimizer + st.buffers + static_cast<uint64_t>(p - st.stage - 1) * c.held +
                    static_cast<uint64_t>(st.stage) * c.weight_grad_held + std::max(c.peak, c.weight_grad_held))
          << strategy << " stage " << st.stage;
      EXPECT_GE(h1.timelines[static_cast<std::size_t>(st.stage)].peak_bytes, st.peak());
    }
  }
}

// What waits between B and W: each Linear's input and its output's gradient,
// 7h + 9h of 16-bit values a GPT layer, 32sbh (the input of c_attn, c_proj,
// c_fc and the MLP's c_proj: h, h, h, 4h; their outputs: 3h, h, 4h, h).
TEST(StageTimeline, WeightGradHeldIs32sbhALayer) {
  const StackShape g = parse_stack_shape("gpt:4:256:4:64:2:bf16");
  const uint64_t s = 64, b = 2, h = 256;
  const RankSlice one{.first_block = 1, .blocks = 1, .first_stage = false, .last_stage = false};
  RankSlice two = one;
  two.blocks = 2;
  EXPECT_EQ(weight_grad_held(rank_model(g, two)) - weight_grad_held(rank_model(g, one)), 32 * s * b * h);
}

TEST(StageTimeline, InterleavedStagePeakWithinTheTable) {
  const ParallelReport r = simulate_parallel("gpt:16:256:4:64:1:bf16", pipeline_spec(2, PipelineSchedule::Interleaved, 4, 2), "store-all", {}, {});
  for (const StageReport& st : r.stages) {
    const StageTimeline& tl = r.timelines[static_cast<std::size_t>(st.stage)];
    EXPECT_EQ(tl.most_waiting_backward(), st.in_flight);
    // The table takes the largest chunk's figures for every chunk; the timeline each chunk's own.
    EXPECT_LE(tl.peak_bytes, st.peak());
    uint64_t least_held = UINT64_MAX, least_peak = UINT64_MAX;
    for (const ChunkMemory& c : st.chunk_memory) least_held = std::min(least_held, c.held), least_peak = std::min(least_peak, c.peak);
    EXPECT_GE(tl.peak_bytes, tl.baseline + static_cast<uint64_t>(st.in_flight - 1) * least_held + least_peak);
  }
}

TEST(StageTimeline, TooLargeAGridIsRefused) {
  EXPECT_EQ(remat::testing::input_error_of([] { (void)pipeline_grid(pipeline_spec(4096, PipelineSchedule::GPipe, 1 << 20)); }),
            "--parallel: the per-stage timelines would hold 12884901888 cells (pp x micro-batches x V x 3), over the "
            "limit of 16777216");
}
