// A training step split over devices, per pipeline stage: each stage's rank
// model (rank_model.h) simulated under a checkpointing strategy for one
// micro-batch, its activations multiplied by the micro-batches the pipeline
// schedule keeps in flight there (pipeline.h), beside the model states ZeRO
// leaves it (zero.h) and the buffers it holds; the step's time and each
// stage's idle share from the time model. Every rank of a stage's tensor- and
// data-parallel groups holds the same, so a stage's figures are its ranks'.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/step_memory.h"
#include "core/model/model.h"
#include "core/parallel/parallel_spec.h"
#include "core/parallel/pipeline.h"
#include "core/parallel/pipeline_grid.h"
#include "core/parallel/rank_model.h"
#include "core/parallel/stage_timeline.h"
#include "core/sim/instruction_limit.h"
#include "core/sim/schedule.h"
#include "core/sim/time_model.h"

namespace remat {

struct StageReport {
  int stage = 0;
  std::vector<RankSlice> chunks;  // its blocks: one slice, or V under interleaved:V
  int in_flight = 0;              // micro-batches (chunks under interleaved) held at once
  // One micro-batch (chunk) under the strategy: what it keeps from its
  // forward to its backward, and its own peak.
  uint64_t held_per_micro_batch = 0;
  uint64_t micro_batch_peak = 0;
  std::vector<ChunkMemory> chunk_memory;  // per chunk: what the stage's timeline is made of
  uint64_t weights = 0, gradients = 0, optimizer = 0;
  // (in_flight - 1) x held_per_micro_batch + micro_batch_peak: the others
  // wait with what they keep while one runs its step.
  uint64_t activations = 0;
  // Sequence parallelism's gathered input in the backward (Megatron-LM's one
  // global buffer) and, under ZeRO-3, one module's gathered weights.
  uint64_t buffers = 0;
  double recompute_overhead = 0;  // recomputed FLOPs over one forward and backward
  StageTimes times;               // per micro-batch, all chunks
  double idle = 0;                // share of the step this stage waits: the bubble, and the wait for slower stages
  uint64_t peak() const { return weights + gradients + optimizer + activations + buffers; }
};

struct ParallelReport {
  std::string model;
  ParallelSpec spec;
  std::string strategy;
  DType dtype = DType::F32;  // the weights' (mixed precision under Adam when 16-bit)
  std::vector<StageReport> stages;
  double step_s = 0;
  double bubble_fraction = 0;  // the bubble over the step, on the slowest stage
  // The schedule in unit slots and each stage's memory over them: per slot,
  // the micro-batches the schedule has in flight there (the table's
  // in-flight is their most); under zb-h1/zb-h2 also those waiting for their
  // W, which the table's activations leave out.
  PipelineGrid grid;
  std::vector<StageTimeline> timelines;
};

// Blocks per stage, balanced: L / n each, the remainder one more each on the
// last stages (the first stage holds the most micro-batches). Throws
// InputError when a stage would have none.
std::vector<int> balanced_blocks(int layers, int stages);
// spec.stages when given (checked: P x V stages holding all `layers` blocks),
// else balanced_blocks. Throws InputError saying what does not add up.
std::vector<int> stage_blocks(int layers, const ParallelSpec& spec);

// The bytes resident when the forward pass ends (before the first backward):
// what a micro-batch keeps while it waits for its backward.
uint64_t held_after_forward(const Model& model, const Schedule& schedule);
// What a micro-batch keeps from its B to its W under a zero-bubble schedule
// (ChunkMemory::weight_grad_held).
uint64_t weight_grad_held(const Model& model);

// The model states are core/analysis/step_memory.h's for `optimizer`: under
// Adam with f16 or bf16 weights, mixed precision (fp32 master weights,
// exp_avg, exp_avg_sq: 12 bytes a weight, ZeRO's K), the optimizer column
// holding all three. `model_spec` is a gpt: or transformer: preset, or a
// model file (.json, .onnx, a path), split into pipeline stages by its
// repeated blocks (block_stages.h) and, with tp > 1 or sp, each stage into
// its rank's model (tensor_split.h). Throws InputError for another preset, a
// file without repeated blocks or whose blocks cannot be split (naming the
// op and why), a degree that does not divide, or a strategy that cannot
// apply to a stage (naming the stage).
ParallelReport simulate_parallel(const std::string& model_spec, const ParallelSpec& spec, const std::string& strategy,
                                 const TimeModel& time, const InstructionLimit& limit,
                                 Optimizer optimizer = Optimizer::Adam);

// A model file (.json, .onnx, a path) rather than a preset spec.
bool names_a_model_file(const std::string& spec);

}  // namespace remat
