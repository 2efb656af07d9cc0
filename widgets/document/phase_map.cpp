#include "widgets/document/phase_map.h"

#include <algorithm>
#include <cmath>

#include "core/model/model.h"

namespace remat {

PhaseMap::PhaseMap(const Model& model, const Schedule& schedule) {
  std::vector<uint8_t> computed(static_cast<std::size_t>(model.size()), 0);
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    const Instr ins = schedule.code[i];
    const auto v = static_cast<std::size_t>(ins.op);
    if (ins.kind == InstrKind::Fwd && !computed[v]) {
      computed[v] = 1;
      events_.push_back(i);
    } else if (ins.kind == InstrKind::Bwd) {
      events_.push_back(i);
    }
  }
  if (schedule.code.empty()) return;
  anchors_.push_back(-1);
  for (std::size_t e : events_) anchors_.push_back(static_cast<long long>(e));
  // The trailing frees after the last backward take the last phase unit.
  const auto last = static_cast<long long>(schedule.code.size() - 1);
  if (anchors_.back() < last) anchors_.push_back(last);
}

double PhaseMap::phaseAt(std::size_t step) const {
  if (anchors_.size() < 2) return 0;
  const auto t = std::min(static_cast<long long>(step), anchors_.back());
  // The first anchor at or after t: t lies in (anchors_[k-1], anchors_[k]].
  const auto it = std::lower_bound(anchors_.begin() + 1, anchors_.end(), t);
  const auto k = static_cast<std::size_t>(it - anchors_.begin());
  const long long lo = anchors_[k - 1], hi = anchors_[k];
  return static_cast<double>(k - 1) + static_cast<double>(t - lo) / static_cast<double>(hi - lo);
}

std::size_t PhaseMap::stepAt(double phase) const {
  if (anchors_.size() < 2) return 0;
  phase = std::clamp(phase, 0.0, phaseCount());
  const auto k = std::min(static_cast<std::size_t>(std::floor(phase)), anchors_.size() - 2);
  const double f = phase - static_cast<double>(k);
  const long long lo = anchors_[k], hi = anchors_[k + 1];
  const long long t = lo + std::llround(f * static_cast<double>(hi - lo));
  return static_cast<std::size_t>(std::max(0LL, t));
}

}  // namespace remat
