// A pipeline schedule as the papers draw it: per device, the order of its
// forward (F), backward (B) and, for zero-bubble schedules, weight-gradient
// (W) passes, each micro-batch's pass one cell of one time slot, every pass
// started in the first slot its inputs allow. Unit slots, whatever a pass
// costs: the order and the micro-batches in flight are the schedule's, the
// seconds are the time model's (pipeline.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/parallel/parallel_spec.h"

namespace remat {

enum class PassKind : uint8_t { Forward, Backward, WeightGrad };
char pass_letter(PassKind k);  // 'F', 'B', 'W'

struct PipelinePass {
  PassKind kind = PassKind::Forward;
  int micro_batch = 0;
  int chunk = 0;  // the device's model chunk (0 but under interleaved:V)
  int slot = 0;   // the time step it runs in
};

struct PipelineGrid {
  int devices = 0;
  int length = 0;                                // the step, in slots
  std::vector<std::vector<PipelinePass>> passes;  // per device, in slot order (an idle slot has none)
  // Per device and slot, the pass run there (an index into passes[device]) or -1: idle.
  std::vector<int> at(int device) const;
};

// Each device's passes in the order its schedule runs them:
//   gpipe: every forward, then every backward (Huang et al. 2019);
//   1f1b: min(p - r - 1, M) forwards, then a forward and a backward by turns,
//     then the backwards left (Narayanan et al. 2021);
//   interleaved:V: Megatron-LM's order: forwards by groups of p micro-batches
//     through chunks 0..V-1, backwards through chunks V-1..0, a warm-up of
//     2(p - r - 1) + (V - 1)p forwards (at most MV), then by turns;
//   zb-h1: 1F1B's order with B split from W: stage r's first r backwards
//     leave their W for the end, every later B is followed by its oldest W
//     (Qi et al. 2023, as their DeepSpeed schedule runs it);
//   zb-h2: as zb-h1 with 2(p - r - 1) warm-up forwards, so the first stage
//     holds 2p - 1 micro-batches (Qi et al.'s (2p - 1) M_B).
// Backward passes here are the input-gradient half only under zb-h1/zb-h2;
// elsewhere B is the whole backward and there is no W.
std::vector<std::vector<PipelinePass>> pipeline_order(const ParallelSpec& p);

// The schedule played in unit slots: a pass runs in the first slot after the
// passes it needs (the previous stage's F of its micro-batch; the next
// stage's B, or its own F on the last stage; its own B for a W) and the
// device's previous pass. Throws InputError when the grid would exceed
// kMaxGridCells (devices x slots).
PipelineGrid pipeline_grid(const ParallelSpec& p);
constexpr int64_t kMaxGridCells = int64_t{1} << 24;

}  // namespace remat
