#include "core/analysis/micro_batch_sweep.h"

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/analysis/micro_batch.h"

namespace remat {

std::vector<MicroBatchRow> micro_batch_sweep(const Model& base, const std::vector<std::string>& specs,
                                             const std::vector<int>& ks, const MicroBatchSweepOptions& o) {
  std::vector<MicroBatchRow> rows;
  const int total = static_cast<int>(ks.size() * specs.size());
  int done = 0;
  for (int k : ks) {
    const Model m = micro_batch(base, k);
    for (const std::string& spec : specs) {
      if (o.cancel && o.cancel->load()) return rows;
      const StrategyRun r = std::move(simulate_strategies(m, {spec}, {.limit = o.limit, .timelines = false, .time = std::nullopt}).front());
      if (!r.ok()) throw InputError("strategy '" + r.spec + "' with --micro-batches " + std::to_string(k) + ": " + r.error);
      rows.push_back({k, m.op(0).shape.empty() ? 1 : m.op(0).shape[0], r.name, r.sim.peak_bytes,
                      step_memory(m, o.optimizer, r.sim.peak_bytes).total(), k * r.sim.flops});
      if (o.progress) o.progress(++done, total);
    }
  }
  return rows;
}

}  // namespace remat
