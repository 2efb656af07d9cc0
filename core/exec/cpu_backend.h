// The CPU reference backend: float32, the remat::cpu kernels (Eigen GEMMs,
// single-threaded so results are bit-for-bit reproducible), host memory.
//
// Memory figures:
// - live/peak_bytes: the tracked activations and gradients, exactly the bytes
//   the executor asked for (each buffer is 64-byte aligned underneath; the
//   rounding is not counted).
// - device_peak_bytes: the high-water mark of everything this backend holds:
//   baseline (parameters, their gradients, target/labels, loss) + tracked +
//   scratch buffers (the pre-activation gradient of Dense's backward, and the
//   throw-away dx of a Linear/Dense/LayerNorm whose input has no gradient
//   tensor). Scratch grows on demand and is kept between runs.
#pragma once
#include <chrono>
#include <unordered_map>

#include "core/exec/backend.h"

namespace remat {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }

  void load(const Model& model, const HostData& data) override;
  void zero_param_grads() override;
  uint64_t baseline_bytes() const override { return baseline_bytes_; }

  void* allocate(uint64_t bytes) override;
  void release(void* p) override;
  uint64_t live_bytes() const override { return live_; }
  uint64_t peak_bytes() const override { return peak_; }
  uint64_t device_peak_bytes() const override { return device_peak_; }
  void reset_peaks() override;
  void upload(void* dst, const void* src, uint64_t bytes) override;

  void forward(const Model& model, int op, const TensorTable& t) override;
  void backward(const Model& model, int op, const TensorTable& t, std::span<const uint8_t> accumulate) override;

  float read_loss() override { return loss_; }
  std::vector<float> read_param_grad(std::size_t index) override;

  void synchronize() override {}
  void begin_marks(std::size_t count) override;
  void mark(std::size_t index) override;
  std::vector<double> mark_times_ms() override;

 private:
  float* scratch(int which, int64_t floats);  // grows scratch buffer `which`
  void note_device();
  const float* param(int op, int slot) const;
  float* param_grad(int op, int slot);

  std::unordered_map<void*, uint64_t> blocks_;
  // Released blocks by rounded size, handed out again before malloc is asked:
  // a training step frees and re-allocates the same sizes, and fresh pages
  // from the OS cost a page fault each (a sixth of a step at width 1024).
  // Per size, never more blocks than were once live together; freed with the backend.
  std::unordered_map<uint64_t, std::vector<void*>> spare_;
  uint64_t live_ = 0, peak_ = 0, device_peak_ = 0;
  uint64_t baseline_bytes_ = 0, scratch_bytes_ = 0;
  std::vector<float> scratch_[2];

  uint64_t seed_ = 0;
  std::vector<std::vector<float>> params_, grads_;
  std::vector<int> first_param_;  // per op: index into params_, -1 when none
  std::vector<float> target_;
  std::vector<int32_t> labels_;
  float loss_ = 0;

  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace remat
