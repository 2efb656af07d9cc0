#include "core/sim/resident_index.h"

#include <algorithm>
#include <cmath>

#include "core/model/model.h"
#include "core/sim/simulator.h"

namespace remat {
namespace {

std::vector<int32_t> ids(const std::vector<uint8_t>& flags) {
  std::vector<int32_t> out;
  for (std::size_t v = 0; v < flags.size(); ++v) {
    if (flags[v]) out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

std::vector<std::pair<int32_t, uint8_t>> values(const std::vector<uint8_t>& per_op) {
  std::vector<std::pair<int32_t, uint8_t>> out;
  for (std::size_t v = 0; v < per_op.size(); ++v) {
    if (per_op[v]) out.emplace_back(static_cast<int32_t>(v), per_op[v]);
  }
  return out;
}

std::vector<std::pair<int32_t, int32_t>> grads(const ResidentSet& r) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (std::size_t v = 0; v < r.grad.size(); ++v) {
    if (r.grad[v]) out.emplace_back(static_cast<int32_t>(v), r.grad_storage[v]);
  }
  return out;
}

}  // namespace

ResidentIndex::ResidentIndex(const Model& model, const Schedule& schedule) : model_(&model), schedule_(&schedule) {
  // First pass finds the largest resident set so the stride can bound the
  // snapshots' total size by about the schedule length.
  ResidentSet r(model);
  std::size_t most = 1;
  for (const Instr& ins : schedule.code) {
    r.apply(model, ins);
    most = std::max(most, r.count);
  }
  const auto sq = static_cast<std::size_t>(std::sqrt(static_cast<double>(schedule.code.size())));
  stride_ = std::max<std::size_t>({64, most, sq});

  ResidentSet s(model);
  for (std::size_t i = 0; i < schedule.code.size(); ++i) {
    if (i % stride_ == 0) snapshots_.push_back({ids(s.act), ids(s.aux), grads(s), values(s.host), values(s.packed)});
    s.apply(model, schedule.code[i]);
  }
}

ResidentIndex::Flags ResidentIndex::replay(std::size_t t) const {
  const std::size_t k = std::min(t / stride_, snapshots_.size() - 1);
  ResidentSet r(*model_);
  r.act[0] = 0;
  for (int32_t v : snapshots_[k].act) r.act[static_cast<std::size_t>(v)] = 1;
  for (auto [v, g] : snapshots_[k].grad) r.grad[static_cast<std::size_t>(v)] = 1, r.grad_storage[static_cast<std::size_t>(v)] = g;
  for (int32_t v : snapshots_[k].aux) r.aux[static_cast<std::size_t>(v)] = 1;
  for (auto [v, h] : snapshots_[k].host) r.host[static_cast<std::size_t>(v)] = h;
  for (auto [v, p] : snapshots_[k].packed) r.packed[static_cast<std::size_t>(v)] = p;
  r.recount(*model_);  // storage holders follow from the aliases
  for (std::size_t i = k * stride_; i <= t && i < schedule_->code.size(); ++i) r.apply(*model_, schedule_->code[i]);
  return {std::move(r.act), std::move(r.grad), std::move(r.aux), std::move(r.packed)};
}

std::vector<TensorRef> ResidentIndex::resident_at(std::size_t t) const {
  const Flags f = replay(t);
  std::vector<TensorRef> out;
  for (int32_t v : ids(f.act)) out.push_back({v, false});
  for (int32_t v : ids(f.grad)) out.push_back({v, true});
  for (int32_t v : ids(f.aux)) out.push_back({v, false, true});
  for (int32_t v : ids(f.packed)) out.push_back({v, false, false, true});
  return out;
}

std::vector<uint8_t> ResidentIndex::activations_at(std::size_t t) const { return replay(t).act; }

}  // namespace remat
