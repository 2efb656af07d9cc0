#include "gpu/backend/gated_timer.h"

#include <atomic>

#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

void store(int* host, int value) {
  *reinterpret_cast<volatile int*>(host) = value;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // seen by the spinning kernel now, not at some later flush
}

}  // namespace

GatedTimer::GatedTimer(cudaStream_t stream) : stream_(stream) {
  void* p = nullptr;
  CUDA_CHECK_THROW(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  host_flags_ = static_cast<int*>(p);
  host_flags_[0] = 1;
  host_flags_[1] = 0;
  void* d = nullptr;
  if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
    (void)cudaFreeHost(p);
    CUDA_CHECK_THROW(cudaGetLastError());
  }
  device_flags_ = static_cast<int*>(d);
}

GatedTimer::~GatedTimer() {
  open();
  (void)cudaStreamSynchronize(stream_);
  for (auto* events : {&start_, &end_})
    for (cudaEvent_t e : *events) (void)cudaEventDestroy(e);
  if (host_flags_) (void)cudaFreeHost(host_flags_);
}

void GatedTimer::begin(std::size_t n) {
  open();
  const std::size_t intervals = n > 0 ? n - 1 : 0;
  for (auto* events : {&start_, &end_})
    while (events->size() < intervals) {
      cudaEvent_t e = nullptr;
      CUDA_CHECK_THROW(cudaEventCreate(&e));
      events->push_back(e);
    }
  timed_.assign(intervals, 0);
  count_ = n;
  holding_ = false;
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  host_flags_[1] = 0;
}

void GatedTimer::open() {
  if (host_flags_ && host_flags_[0] == 0) store(host_flags_, 1);
}

void GatedTimer::record(std::size_t index) {
  if (index >= count_) return;
  if (holding_) {
    CUDA_CHECK_THROW(cudaEventRecord(end_[held_], stream_));
    timed_[held_] = 1;
    holding_ = false;
  }
  open();
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  if (index + 1 >= count_) return;  // the last mark: nothing after it to hold
  store(host_flags_, 0);
  gate_hold(device_flags_, device_flags_ + 1, kLimitNs, stream_);
  CUDA_CHECK_THROW(cudaEventRecord(start_[index], stream_));
  held_ = index;
  holding_ = true;
}

std::vector<double> GatedTimer::elapsed_ms() {
  open();
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  std::vector<double> out(count_, 0.0);
  for (std::size_t i = 1; i < count_; ++i) {
    float ms = 0;
    if (timed_[i - 1]) CUDA_CHECK_THROW(cudaEventElapsedTime(&ms, start_[i - 1], end_[i - 1]));
    out[i] = out[i - 1] + ms;
  }
  return out;
}

int GatedTimer::timeouts() const {
  return host_flags_ ? *reinterpret_cast<volatile const int*>(host_flags_ + 1) : 0;
}

}  // namespace remat::cuda
