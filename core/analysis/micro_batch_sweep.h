// The sweep over micro-batch counts K (`remat simulate --micro-batches
// 1,2,4,8`, the window's K sweep): per K and strategy, one micro-batch's
// activation peak, the whole step's memory and the step's compute (K passes).
// One table for the CLI and the window, so their numbers cannot disagree.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/sim/instruction_limit.h"
#include "core/model/model.h"
#include "core/analysis/step_memory.h"

namespace remat {

struct MicroBatchRow {
  int k = 1;
  int64_t batch = 0;              // of one micro-batch
  std::string strategy;           // canonical name
  uint64_t peak_bytes = 0;        // activations of one micro-batch
  uint64_t step_total_bytes = 0;  // with the baseline (the same for every K: gradients accumulate in place)
  double step_flops = 0;          // K passes
};

struct MicroBatchSweepOptions {
  Optimizer optimizer = Optimizer::SGD;
  InstructionLimit limit;
  const std::atomic<bool>* cancel = nullptr;         // stop and return the rows done
  std::function<void(int done, int total)> progress;  // per strategy and K
};

// Rows in K order, then the specs' order. Throws InputError when K does not
// divide the batch (core/analysis/micro_batch.h) or a strategy does not apply,
// naming both.
std::vector<MicroBatchRow> micro_batch_sweep(const Model& base, const std::vector<std::string>& specs,
                                             const std::vector<int>& ks, const MicroBatchSweepOptions& options = {});

}  // namespace remat
