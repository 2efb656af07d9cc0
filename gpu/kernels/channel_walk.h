// A thread's walk over one channel of x (n, c, hw) in a batch-norm kernel:
// elements e = first, first + step, ... of the channel's n·hw values, each at
// (e / hw · c + ch) · hw + e % hw. The image and offset are carried from one
// element to the next instead of two 64-bit divisions per element, which cost
// more than the loads: the order of the elements, hence of every sum, stays the
// same. Host and device, so that a test checks the walk without a GPU.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace remat::cuda::detail {

class ChannelWalk {
 public:
  __host__ __device__ ChannelWalk(int64_t first, int64_t step, int64_t hw)
      : img_(first / hw), off_(first % hw), step_img_(step / hw), step_off_(step % hw), hw_(hw) {}
  // Where the current element of channel ch is, in x (n, c, hw).
  __host__ __device__ int64_t at(int64_t c, int64_t ch) const { return (img_ * c + ch) * hw_ + off_; }
  __host__ __device__ void next() {
    img_ += step_img_;
    off_ += step_off_;
    if (off_ >= hw_) {
      off_ -= hw_;
      ++img_;
    }
  }

 private:
  int64_t img_, off_, step_img_, step_off_, hw_;
};

}  // namespace remat::cuda::detail
