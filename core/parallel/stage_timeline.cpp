#include "core/parallel/stage_timeline.h"

#include <algorithm>

namespace remat {

int StageTimeline::most_waiting_backward() const {
  return waiting_backward.empty() ? 0 : *std::max_element(waiting_backward.begin(), waiting_backward.end());
}

StageTimeline stage_timeline(const PipelineGrid& grid, int stage, uint64_t baseline, const std::vector<ChunkMemory>& chunks) {
  StageTimeline tl;
  tl.stage = stage;
  tl.baseline = baseline;
  const auto& passes = grid.passes[static_cast<std::size_t>(stage)];
  const auto n = static_cast<std::size_t>(grid.length);
  tl.bytes.assign(n, 0);
  tl.waiting_backward.assign(n, 0);
  tl.waiting_weight_grad.assign(n, 0);
  const bool split = std::any_of(passes.begin(), passes.end(), [](const PipelinePass& p) { return p.kind == PassKind::WeightGrad; });
  uint64_t held = 0, wait_w = 0;  // the waiting micro-batches' bytes
  int nb = 0, nw = 0;
  std::size_t k = 0;
  for (std::size_t t = 0; t < n; ++t) {
    uint64_t bytes = baseline + held + wait_w;  // an idle slot
    if (k < passes.size() && passes[k].slot == static_cast<int>(t)) {
      const PipelinePass& x = passes[k++];
      const ChunkMemory& c = chunks[static_cast<std::size_t>(x.chunk)];
      switch (x.kind) {
        case PassKind::Forward:  // the others wait while it runs; it ends holding `held`
          bytes += std::max(c.forward_peak, c.held);
          held += c.held;
          ++nb;
          break;
        case PassKind::Backward:  // its own peak in place of what it held; ends holding W's tensors
          held -= c.held;
          --nb;
          bytes = baseline + held + wait_w + (split ? std::max(c.peak, c.weight_grad_held) : c.peak);
          if (split) {
            wait_w += c.weight_grad_held;
            ++nw;
          }
          break;
        case PassKind::WeightGrad:  // what it waited with, read now
          --nw;
          wait_w -= c.weight_grad_held;
          bytes = baseline + held + wait_w + c.weight_grad_held;
          break;
      }
    }
    tl.bytes[t] = bytes;
    tl.waiting_backward[t] = nb;
    tl.waiting_weight_grad[t] = nw;
    if (tl.bytes[t] > tl.peak_bytes) {
      tl.peak_bytes = tl.bytes[t];
      tl.peak_slot = static_cast<int>(t);
    }
  }
  return tl;
}

}  // namespace remat
