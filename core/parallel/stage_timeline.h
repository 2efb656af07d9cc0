// One pipeline stage's memory over the schedule's time slots (pipeline_grid.h):
// its model states and buffers, which stay, plus the activations of the
// micro-batches in flight there, each as one micro-batch keeps them under the
// stage's checkpointing strategy, and the pass that runs at its own peak.
#pragma once
#include <cstdint>
#include <vector>

#include "core/parallel/pipeline_grid.h"

namespace remat {

// One micro-batch on one model chunk of the stage, under the strategy.
struct ChunkMemory {
  uint64_t held = 0;          // resident when its forward ends: kept until its backward
  uint64_t forward_peak = 0;  // the most resident during its forward
  uint64_t peak = 0;          // the most resident during its forward and backward
  // Zero-bubble schedules: what waits from its B to its W, the tensors its
  // Linears' weight gradients read: their inputs (a sequence-parallel
  // Linear's gathered input as the all-gather's shard) and their outputs'
  // gradients. 32sbh a GPT layer in 16 bits.
  uint64_t weight_grad_held = 0;
};

struct StageTimeline {
  int stage = 0;
  uint64_t baseline = 0;  // weights, gradients, optimizer state and buffers: resident throughout
  // Per slot: the most resident while it runs (baseline included) and, once
  // it ends, the micro-batches (chunks under interleaved:V) whose forward
  // has run and whose backward has not, and those waiting for their W.
  std::vector<uint64_t> bytes;
  std::vector<int> waiting_backward, waiting_weight_grad;
  int peak_slot = 0;  // the first slot at the peak
  uint64_t peak_bytes = 0;
  int most_waiting_backward() const;
};

// Device `stage` of `grid`: during an idle slot the waiting micro-batches'
// held (and weight_grad_held) bytes; during F another micro-batch's forward
// peak on top; during B its own peak in place of its held (at least its
// weight_grad_held under zb-h1/zb-h2: a B that recomputed its Linears'
// inputs keeps them for W); during W its weight_grad_held. chunks[j] is chunk j's micro-batch.
StageTimeline stage_timeline(const PipelineGrid& grid, int stage, uint64_t baseline, const std::vector<ChunkMemory>& chunks);

}  // namespace remat
