#include "gpu/backend/device_allocator.h"

#include <algorithm>
#include <limits>

#include "gpu/cuda_check.h"

namespace remat::cuda {

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
  for (auto& [p, block] : blocks_) (void)cudaFreeAsync(p, stream_);
  (void)cudaStreamSynchronize(stream_);
  if (pool_) (void)cudaMemPoolDestroy(pool_);
  (void)cudaGetLastError();
}

void* DevicePool::allocate(uint64_t bytes, MemoryUse use, std::optional<uint64_t> counted) {
  const std::size_t ask = static_cast<std::size_t>(std::max<uint64_t>(bytes, 1));
  void* p = nullptr;
  cudaError_t err = cudaMallocFromPoolAsync(&p, ask, pool_, stream_);
  if (err == cudaErrorMemoryAllocation) {
    // Freed blocks may be too fragmented: hand everything unused back to the
    // driver once (after the queued frees have happened) and try again.
    (void)cudaGetLastError();
    trim();
    p = nullptr;
    err = cudaMallocFromPoolAsync(&p, ask, pool_, stream_);
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so the next launch check starts clean
    return nullptr;
  }
  CUDA_CHECK_THROW(err);
  const uint64_t books = counted.value_or(bytes);
  blocks_.emplace(p, Block{books, use});
  asked_[static_cast<int>(use)] += books;
  if (use == MemoryUse::Tensor)
    tensor_peak_ = std::max(tensor_peak_, asked_[static_cast<int>(MemoryUse::Tensor)]);
  return p;
}

void DevicePool::release(void* p) { release_on(p, stream_); }

void DevicePool::release_on(void* p, cudaStream_t stream) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  asked_[static_cast<int>(it->second.use)] -= it->second.asked;
  blocks_.erase(it);
  if (cudaFreeAsync(p, stream) != cudaSuccess) (void)cudaGetLastError();
}

std::optional<uint64_t> DevicePool::asked_bytes(void* p, MemoryUse use) const {
  const auto it = blocks_.find(p);
  if (it == blocks_.end() || it->second.use != use) return std::nullopt;
  return it->second.asked;
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
  tensor_peak_ = asked_[static_cast<int>(MemoryUse::Tensor)];
  uint64_t zero = 0;  // the only value these attributes accept: "reset to the current value"
  CUDA_CHECK_THROW(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  CUDA_CHECK_THROW(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
}

void DevicePool::trim() {
  CUDA_CHECK_THROW(cudaStreamSynchronize(stream_));
  CUDA_CHECK_THROW(cudaMemPoolTrimTo(pool_, 0));
}

}  // namespace remat::cuda
