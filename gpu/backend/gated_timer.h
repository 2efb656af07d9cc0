// Each instruction's device time alone, for REMAT_CUDA_GATE=1 (docs/gpu.md,
// "Is a step waiting for the host?"). At every mark the stream is drained,
// then held by a gate kernel (gpu/kernels/gate.cu) while the host issues the
// next instruction, and let go at the mark after it: the events around the
// held work time that instruction's kernels back to back, without the gaps
// where the device waited for the host. Mark i's time is then the sum of
// instructions 0..i-1's device times, the step's time if the host were never
// late. A diagnosis (gpu/op_times.py sets it), not a way to train: every
// instruction waits for the one before it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::cuda {

class GatedTimer {
 public:
  explicit GatedTimer(cudaStream_t stream);  // throws CudaError
  ~GatedTimer();                             // lets the stream go; never throws
  GatedTimer(const GatedTimer&) = delete;
  GatedTimer& operator=(const GatedTimer&) = delete;

  // n marks, as EventTimer's (the executor's mark(i) before instruction i).
  void begin(std::size_t n);
  // Ends the held instruction's timing, drains the stream and holds it for
  // the next instruction (none after the last mark).
  void record(std::size_t index);
  // Lets the held stream go, so that a synchronisation the executor asks for
  // within an instruction (--sync-each) does not wait for the gate's limit.
  void open();
  // Waits for the device; mark i's time: instructions 0..i-1's device times summed.
  std::vector<double> elapsed_ms();
  // Gates that let go on their time limit (the host waited for the stream
  // inside an instruction) since begin(): those instructions' times include it.
  int timeouts() const;

  static constexpr uint64_t kLimitNs = 2'000'000'000;  // 2 s: no instruction's issue takes that long

 private:
  cudaStream_t stream_;
  int* host_flags_ = nullptr;    // mapped host memory: [0] open, [1] timeouts
  int* device_flags_ = nullptr;  // the same, as the device addresses it
  std::vector<cudaEvent_t> start_, end_;
  std::vector<unsigned char> timed_;
  std::size_t count_ = 0;
  std::size_t held_ = 0;  // the instruction the gate holds, when holding_
  bool holding_ = false;
};

}  // namespace remat::cuda
