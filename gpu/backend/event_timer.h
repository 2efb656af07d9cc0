// Timestamps in stream order with CUDA events, for Timing::mark() (core/exec/backend.h): recording
// is asynchronous, reading waits for the last recorded event.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace remat::cuda {

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {}
  ~EventTimer();  // never throws
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // n marks, none recorded yet; events are created once and reused.
  void begin(std::size_t n);
  void record(std::size_t index);  // out of range: ignored
  // Waits for the device; each mark's ms since mark 0 (0 for marks not recorded,
  // and for all when mark 0 was not).
  std::vector<double> elapsed_ms();

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  std::vector<unsigned char> recorded_;
  std::size_t count_ = 0;
};

}  // namespace remat::cuda
