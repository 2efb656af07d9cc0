// "What is resident at step t?" for any t without replaying from zero: the
// resident set is snapshotted every `stride` instructions and a query replays
// at most `stride` instructions from the snapshot before it. The stride grows
// with the largest resident set, so snapshots stay linear in the schedule.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/sim/schedule.h"
#include "core/sim/tensor_ref.h"

namespace remat {

struct Model;

class ResidentIndex {
 public:
  // `schedule` must be valid (simulate() accepted it) and outlive the index.
  ResidentIndex(const Model& model, const Schedule& schedule);

  std::size_t size() const { return schedule_->code.size(); }
  std::size_t stride() const { return stride_; }
  // Tensors resident on the device while instruction t runs (after its
  // allocation; after the release for a free or an offload), activations then
  // gradients then aux then compressed copies C(v), each by op id. What is on
  // the host (offloaded) is not listed.
  std::vector<TensorRef> resident_at(std::size_t t) const;
  // Activation residency per op while instruction t runs (the GUI's node states).
  std::vector<uint8_t> activations_at(std::size_t t) const;

 private:
  struct Snapshot {
    std::vector<int32_t> act, aux;  // op ids resident before instruction k*stride
    std::vector<std::pair<int32_t, int32_t>> grad;  // (op id, the gradient storage it aliases)
    // (op id, ResidentSet's value): offloaded tensors, so that a replay's
    // fetch finds them, and compressed copies on the device.
    std::vector<std::pair<int32_t, uint8_t>> host, packed;
  };
  struct Flags {
    std::vector<uint8_t> act, grad, aux, packed;
  };
  Flags replay(std::size_t t) const;

  const Model* model_;
  const Schedule* schedule_;
  std::size_t stride_ = 1;
  std::vector<Snapshot> snapshots_;
};

}  // namespace remat
