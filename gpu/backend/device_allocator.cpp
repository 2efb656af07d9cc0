#include "gpu/backend/device_allocator.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "gpu/cuda_check.h"

namespace remat::cuda {
namespace {

std::atomic<uint64_t> g_buffer_bytes{0};

}  // namespace

// ---- DevicePool -----------------------------------------------------------------

DevicePool::DevicePool(int device, cudaStream_t stream) : stream_(stream) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  CUDA_CHECK_THROW(cudaMemPoolCreate(&pool_, &props));
  // Keep freed memory in the pool: without this, every synchronisation would
  // hand it back to the driver and the next run would map it again.
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  const cudaError_t err = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
  if (err != cudaSuccess) {
    cudaMemPoolDestroy(pool_);
    CUDA_CHECK_THROW(err);
  }
}

DevicePool::~DevicePool() {
  for (auto& [p, bytes] : blocks_) (void)cudaFreeAsync(p, stream_);
  (void)cudaStreamSynchronize(stream_);
  if (pool_) (void)cudaMemPoolDestroy(pool_);
  (void)cudaGetLastError();
}

void* DevicePool::allocate(uint64_t bytes) {
  const std::size_t ask = static_cast<std::size_t>(std::max<uint64_t>(bytes, 1));
  void* p = nullptr;
  cudaError_t err = cudaMallocFromPoolAsync(&p, ask, pool_, stream_);
  if (err == cudaErrorMemoryAllocation) {
    // Freed blocks may be too fragmented: hand everything unused back to the
    // driver once (after the queued frees have happened) and try again.
    (void)cudaGetLastError();
    CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
    CUDA_CHECK_THROW(cudaMemPoolTrimTo(pool_, 0));
    p = nullptr;
    err = cudaMallocFromPoolAsync(&p, ask, pool_, stream_);
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so the next launch check starts clean
    return nullptr;
  }
  CUDA_CHECK_THROW(err);
  blocks_.emplace(p, bytes);
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return p;
}

void DevicePool::release(void* p) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  live_ -= it->second;
  blocks_.erase(it);
  // Never throws: the executor releases from a destructor, also while a CUDA
  // error unwinds. A sticky error shows again at the next checked call.
  if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
}

uint64_t DevicePool::attribute(cudaMemPoolAttr attr) const {
  uint64_t value = 0;  // cuuint64_t for the memory attributes
  CUDA_CHECK_THROW(cudaMemPoolGetAttribute(pool_, attr, &value));
  return value;
}

uint64_t DevicePool::used_high_bytes() const { return attribute(cudaMemPoolAttrUsedMemHigh); }
uint64_t DevicePool::reserved_high_bytes() const { return attribute(cudaMemPoolAttrReservedMemHigh); }
uint64_t DevicePool::reserved_bytes() const { return attribute(cudaMemPoolAttrReservedMemCurrent); }

uint64_t DevicePool::unused_reserved_bytes() const noexcept {
  uint64_t reserved = 0, used = 0;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return reserved > used ? reserved - used : 0;
}

void DevicePool::reset_peaks() {
  peak_ = live_;
  uint64_t zero = 0;  // the only value these attributes accept: "reset to the current value"
  CUDA_CHECK_THROW(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  CUDA_CHECK_THROW(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
}

// ---- DeviceBuffer ---------------------------------------------------------------

DeviceBuffer::DeviceBuffer(uint64_t bytes) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(&ptr_, static_cast<std::size_t>(bytes));
  if (err != cudaSuccess) {
    ptr_ = nullptr;
    (void)cudaGetLastError();  // an out-of-memory is not sticky: leave nothing behind
    CUDA_CHECK_THROW(err);
  }
  bytes_ = bytes;
  g_buffer_bytes += bytes;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() noexcept {
  if (!ptr_) return;
  (void)cudaFree(ptr_);  // synchronises with the device: nothing queued can still use it
  g_buffer_bytes -= bytes_;
  ptr_ = nullptr;
  bytes_ = 0;
}

uint64_t DeviceBuffer::total_live_bytes() { return g_buffer_bytes.load(); }

}  // namespace remat::cuda
