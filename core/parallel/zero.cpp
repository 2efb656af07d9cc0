#include "core/parallel/zero.h"

namespace remat {

ModelStates zero_shard(const ModelStates& full, int dp, int stage) {
  const uint64_t d = dp < 1 ? 1 : static_cast<uint64_t>(dp);
  auto share = [&](uint64_t b) { return (b + d - 1) / d; };
  ModelStates s = full;
  if (stage >= 1) s.optimizer = share(full.optimizer);
  if (stage >= 2) s.gradients = share(full.gradients);
  if (stage >= 3) s.weights = share(full.weights);
  return s;
}

}  // namespace remat
