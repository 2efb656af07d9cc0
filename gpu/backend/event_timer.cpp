#include "gpu/backend/event_timer.h"

#include "gpu/cuda_check.h"

namespace remat::cuda {

EventTimer::~EventTimer() {
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
}

void EventTimer::begin(std::size_t n) {
  events_.reserve(n);
  while (events_.size() < n) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK_THROW(cudaEventCreate(&e));
    events_.push_back(e);
  }
  count_ = n;
  recorded_.assign(n, 0);
}

void EventTimer::record(std::size_t index) {
  if (index >= count_) return;
  CUDA_CHECK_THROW(cudaEventRecord(events_[index], stream_));
  recorded_[index] = 1;
}

std::vector<double> EventTimer::elapsed_ms() {
  std::vector<double> out(count_, 0.0);
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  if (count_ == 0 || !recorded_[0]) return out;
  for (std::size_t i = 1; i < count_; ++i) {
    if (!recorded_[i]) {
      out[i] = out[i - 1];
      continue;
    }
    float ms = 0;
    CUDA_CHECK_THROW(cudaEventElapsedTime(&ms, events_[0], events_[i]));
    out[i] = ms;
  }
  return out;
}

}  // namespace remat::cuda
