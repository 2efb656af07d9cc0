// Data parallelism with ZeRO (Rajbhandari et al. 2020): the model states one
// data-parallel rank holds when stage 1 shards the optimizer state, stage 2
// also the gradients, stage 3 also the weights, over D ranks.
#pragma once
#include <cstdint>

namespace remat {

struct ModelStates {
  uint64_t weights = 0;    // as the model stores them (fp16/bf16 under mixed precision)
  uint64_t gradients = 0;  // one per weight, in the weight's dtype
  uint64_t optimizer = 0;  // fp32 master weights (mixed precision) and the optimizer's buffers
  uint64_t total() const { return weights + gradients + optimizer; }
};

// `full`: what one rank would hold without sharding; each sharded part is
// divided by D, rounded up (a rank holds a whole share). Stage 0 or D = 1
// returns `full`.
ModelStates zero_shard(const ModelStates& full, int dp, int stage);

}  // namespace remat
