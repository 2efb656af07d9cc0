#include "gpu/backend/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <thread>

#include "core/base/errors.h"
#include "core/exec/cpu_mixed.h"
#include "core/exec/instruction_gate.h"
#include "gpu/backend/cuda_mixed.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/cuda_kernels.h"

namespace remat::cuda {
namespace {

constexpr uint64_t kAlignFloats = 64;  // 256 bytes: every parameter tensor starts aligned

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// cuBLAS's workspace, ours to give (cublasSetWorkspace): the size NVIDIA
// recommends for the architecture (the cuBLAS docs: 32 MiB from Hopper on,
// 4 MiB before), allocated from the pool and counted like any buffer.
uint64_t workspace_size(const cudaDeviceProp& prop) {
  return prop.major >= 9 ? (uint64_t{32} << 20) : (uint64_t{4} << 20);
}

// What the loaded model's backward runs non-deterministically under
// --nondeterministic-backward: cuDNN's algorithms as the convolutions' plans
// chose them for this model (a backward-data call only where the input has a
// gradient; a transposed convolution's backward runs its geometry's
// backward-filter, its forward's backward-data stays deterministic), and the
// embedding gradients (atomicAdd).
std::vector<std::string> nondeterministic_report(const Model& model, const CudaOpState& s, const ConvContext& probe) {
  std::vector<std::string> out;
  if (!s.nondeterministic_backward) return out;
  int convs = 0, data = 0, filter = 0, any = 0, embeddings = 0;
  for (int v = 1; v < model.size(); ++v) {
    const Op& op = model.op(v);
    if (op.kind == OpKind::Embedding) ++embeddings;
    if (op.kind != OpKind::Conv && op.kind != OpKind::ConvTranspose) continue;
    ++convs;
    ConvBackwardAlgos a;
    if (op.kind == OpKind::ConvTranspose) {
      a.filter_nondeterministic = conv2d_backward_algos(conv_transpose_geom(model, v), probe).filter_nondeterministic;
    } else if (lowp_conv(model, v, true, s.cudnn ? s.conv_mode : GemmMode::F32) &&
               !s.conv_f32[static_cast<std::size_t>(v)]) {
      a = conv2d_lowp_backward_algos(op.dtype == DType::F16 ? HalfType::F16 : HalfType::BF16, conv_geom(model, v),
                                     probe);
    } else {
      a = conv2d_backward_algos(conv_geom(model, v), probe);
    }
    a.data_nondeterministic = a.data_nondeterministic && model.has_grad_tensor(op.inputs[0]);
    data += a.data_nondeterministic;
    filter += a.filter_nondeterministic;
    any += a.data_nondeterministic || a.filter_nondeterministic;
  }
  if (any)
    out.push_back("cuDNN convolution backward: its first-ranked algorithm whatever its determinism, "
                  "non-deterministic (atomic sums) for " + std::to_string(any) + " of " + std::to_string(convs) +
                  " convolutions (backward-data " + std::to_string(data) + ", backward-filter " +
                  std::to_string(filter) + ")");
  if (embeddings)
    out.push_back("embedding gradient: atomicAdd, a repeated token's positions summed in any order, for " +
                  std::to_string(embeddings) + " of " + std::to_string(embeddings) + " embeddings");
  return out;
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  state_.gemm_mode = gemm_mode_from_env();
  state_.pointwise_mode = pointwise_mode_from_env();
  state_.conv_mode = conv_mode_from_env();
  create();
}

CudaBackend::~CudaBackend() { destroy(); }

void CudaBackend::create() {
  CUDA_CHECK_THROW(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK_THROW(cudaGetDeviceProperties(&prop, device_));
  name_ = std::string("cuda: ") + prop.name;
  try {
    CUDA_CHECK_THROW(cudaStreamCreateWithFlags(&state_.stream, cudaStreamNonBlocking));
    CUDA_CHECK_THROW(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    host_pool_ = std::make_unique<PinnedHostPool>();
    CUBLAS_CHECK_THROW(cublasCreate(&state_.cublas));
    pool_ = std::make_unique<DevicePool>(device_, state_.stream);
    timer_ = std::make_unique<EventTimer>(state_.stream);
    if (gate_from_env()) {
      gated_ = std::make_unique<GatedTimer>(state_.stream);
      name_ += " (REMAT_CUDA_GATE=1: each instruction's kernels timed alone)";
    }
    // Stream first, then the workspace: cublasSetStream resets the workspace.
    CUBLAS_CHECK_THROW(cublasSetStream(state_.cublas, state_.stream));
    workspace_bytes_ = workspace_size(prop);
    void* ws = pool_->allocate(workspace_bytes_, MemoryUse::Workspace);
    if (!ws) throw DeviceOutOfMemory("the cuBLAS workspace", workspace_bytes_, 0);
    CUBLAS_CHECK_THROW(cublasSetWorkspace(state_.cublas, ws, workspace_bytes_));
    state_.cublas_workspace = ws;
    state_.cublas_workspace_bytes = workspace_bytes_;
    if (cudnn_available()) {
      // A cuDNN that cannot start (a library found at build time whose parts
      // do not load here) costs speed, not correctness: im2col + cuBLAS runs
      // every convolution.
      try {
        state_.cudnn = cudnn_create(state_.stream);
      } catch (const CudaError& e) {
        (void)cudaGetLastError();
        std::cerr << "remat: warning: cuDNN could not start (" << e.what()
                  << "); convolutions run on im2col and cuBLAS\n";
      }
    }
    CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));
  } catch (...) {
    destroy();
    throw;
  }
  healthy_ = true;
}

void CudaBackend::destroy() {
  let_go();
  if (state_.stream) (void)cudaStreamSynchronize(state_.stream);
  if (copy_stream_) (void)cudaStreamSynchronize(copy_stream_);
  drop_copy_events();
  host_pool_.reset();
  if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
  timer_.reset();
  gated_.reset();
  held_.clear();
  pool_.reset();  // frees everything still held (workspace, baseline, tensors), in stream order
  if (state_.cudnn) cudnn_destroy(state_.cudnn);
  if (state_.cublas) (void)cublasDestroy(state_.cublas);
  if (state_.stream) (void)cudaStreamDestroy(state_.stream);
  const GemmMode mode = state_.gemm_mode, conv = state_.conv_mode;  // settings, not device objects: recover() keeps them
  const PointwiseMode pw = state_.pointwise_mode;
  const bool any_order = state_.nondeterministic_backward;
  state_ = CudaOpState{};
  state_.gemm_mode = mode;
  state_.conv_mode = conv;
  state_.pointwise_mode = pw;
  state_.nondeterministic_backward = any_order;
  numel_.clear();
  loaded_ = false;
  (void)cudaGetLastError();
}

template <typename F>
auto CudaBackend::guarded(F&& f) -> decltype(f()) {
  if (!healthy_) throw DeviceFault("the device is unusable after an earlier fault");
  try {
    return f();
  } catch (const CudaError& e) {
    if (e.out_of_memory())
      throw DeviceOutOfMemory(std::string("device memory a library asked for: ") + e.what(), 0, device_free_bytes());
    // A kernel fault poisons the context: every later call fails the same way.
    let_go();
    if (cudaDeviceSynchronize() != cudaSuccess) {
      healthy_ = false;
      throw DeviceFault(e.what());
    }
    throw;
  }
}

// ---- Baseline -------------------------------------------------------------------

void* CudaBackend::hold(uint64_t bytes, MemoryUse use, const char* what, std::optional<uint64_t> counted) {
  if (bytes == 0) return nullptr;
  void* p = pool_->allocate(bytes, use, counted);
  if (!p) throw DeviceOutOfMemory(what, bytes, device_free_bytes());
  held_.push_back(p);
  return p;
}

void CudaBackend::drop_baseline() {
  for (void* p : held_) pool_->release(p);
  held_.clear();
  // What create() made outlives a model: the stream, the handles, the lent workspace.
  CudaOpState kept;
  kept.stream = state_.stream;
  kept.cublas = state_.cublas;
  kept.cudnn = state_.cudnn;
  kept.cublas_workspace = state_.cublas_workspace;
  kept.cublas_workspace_bytes = state_.cublas_workspace_bytes;
  // And the settings and counters (as CpuBackend::drop_baseline): a path set
  // by REMAT_CUDA_GEMM/CONV/POINTWISE or set_*_mode must hold for the next
  // model too, and the tests count kernel calls across loads.
  kept.gemm_mode = state_.gemm_mode;
  kept.conv_mode = state_.conv_mode;
  kept.pointwise_mode = state_.pointwise_mode;
  kept.nondeterministic_backward = state_.nondeterministic_backward;
  kept.lowp_calls = state_.lowp_calls;
  kept.lowp_conv_calls = state_.lowp_conv_calls;
  kept.io_calls = state_.io_calls;
  state_ = kept;
  numel_.clear();
  nondeterministic_.clear();
  baseline_bytes_ = grads_bytes_ = 0;
  loaded_ = false;
}

void CudaBackend::load(const Model& model, const HostData& data) {
  // bf16/f16 tensors run through the widening call (cuda_mixed.h); a model
  // with f16 tensors runs with GradScaler's loss scale, as on the CPU.
  initial_loss_scale_ = loss_scale_ = uses_f16(model) ? kF16LossScale : 1.0f;
  const auto tensors = parameter_tensors(model);
  if (data.params.size() != tensors.size()) throw InputError("cuda backend: parameter count does not match the model");
  for (std::size_t k = 0; k < tensors.size(); ++k)
    if (static_cast<int64_t>(data.params[k].size()) != tensors[k].numel())
      throw InputError("cuda backend: parameter " + tensors[k].name + " has the wrong size");
  guarded([&] {
    CUDA_CHECK_THROW(cudaSetDevice(device_));
    let_go();
    CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));
    // The previous model's baseline goes first, so that both never need to fit.
    drop_baseline();
    pool_->trim();
    try {
      // All parameters in one buffer, all their gradients in another (one
      // memset zeroes them), each tensor at a 256-byte aligned offset.
      std::vector<uint64_t> offset;
      std::vector<std::vector<uint8_t>> host_consts;
      uint64_t floats = 0, bytes = 0;  // floats with the alignment padding, bytes without
      for (const auto& p : data.params) {
        offset.push_back(floats);
        numel_.push_back(p.size());
        floats += round_up(p.size(), kAlignFloats);
        bytes += 2 * 4 * p.size();
      }
      auto* params = static_cast<float*>(hold(4 * floats, MemoryUse::Baseline, "the parameters", bytes / 2));
      auto* grads = static_cast<float*>(hold(4 * floats, MemoryUse::Baseline, "the parameter gradients", bytes / 2));
      state_.param_slots = ParamSlots(model);
      for (std::size_t k = 0; k < tensors.size(); ++k) {
        state_.params.push_back(params + offset[k]);
        state_.grads.push_back(grads + offset[k]);
        if (numel_[k])
          CUDA_CHECK_THROW(cudaMemcpyAsync(state_.params[k], data.params[k].data(), 4 * numel_[k],
                                           cudaMemcpyHostToDevice, state_.stream));
      }
      state_.target_n = data.target.size();
      state_.labels_n = data.labels.size();
      auto* target = static_cast<float*>(hold(4 * state_.target_n, MemoryUse::Baseline, "the target"));
      auto* labels = static_cast<int32_t*>(hold(4 * state_.labels_n, MemoryUse::Baseline, "the labels"));
      state_.loss = static_cast<float*>(hold(4, MemoryUse::Baseline, "the loss"));
      if (state_.target_n)
        CUDA_CHECK_THROW(cudaMemcpyAsync(target, data.target.data(), 4 * state_.target_n, cudaMemcpyHostToDevice,
                                         state_.stream));
      if (state_.labels_n)
        CUDA_CHECK_THROW(cudaMemcpyAsync(labels, data.labels.data(), 4 * state_.labels_n, cudaMemcpyHostToDevice,
                                         state_.stream));
      CUDA_CHECK_THROW(cudaMemsetAsync(state_.loss, 0, 4, state_.stream));
      state_.target = target;
      state_.labels = labels;
      state_.seed = data.seed;
      // Each op's constant (values or mask), as the CPU holds it; the host
      // copies stay alive until the stream synchronises below.
      state_.consts.assign(static_cast<std::size_t>(model.size()), nullptr);
      for (int v = 0; v < model.size(); ++v) {
        std::vector<uint8_t> c = constant_bytes(model.op(v));
        if (c.empty()) continue;
        void* p = hold(c.size(), MemoryUse::Baseline, "the constants");
        CUDA_CHECK_THROW(cudaMemcpyAsync(p, c.data(), c.size(), cudaMemcpyHostToDevice, state_.stream));
        state_.consts[static_cast<std::size_t>(v)] = p;
        bytes += c.size();
        host_consts.push_back(std::move(c));
      }
      baseline_bytes_ = bytes + 4 * state_.target_n + 4 * state_.labels_n + 4;  // the CPU's figure
      const ScratchFloats scratch = model_scratch(model);
      for (int i = 0; i < kScratchSlots; ++i) {
        if (i == kConvColumns) continue;  // the convolution workspace below takes its place
        if (i == kAttention) continue;    // the attention kernels stage their tiles in shared memory
        state_.scratch[i] =
            static_cast<float*>(hold(4 * static_cast<uint64_t>(scratch[i]), MemoryUse::Scratch, "backward scratch"));
      }
      // One workspace for every Conv (they run one at a time on the stream), from
      // the pool, so that it is counted as MemoryUse::Workspace.
      size_t conv_ws = 0;
      const ConvContext probe{state_.cublas, state_.cudnn, state_.stream, nullptr, 0,
                              state_.nondeterministic_backward};
      // A 16-bit convolution (lowp_conv) needs its own algorithms' workspace
      // and its weight gradient's staging (conv2d_lowp_workspace_bytes); one
      // cuDNN has no deterministic 16-bit algorithm for runs in f32, said once.
      const GemmMode path = conv_mode();
      state_.conv_f32.assign(static_cast<std::size_t>(model.size()), 0);
      for (int v = 1; v < model.size(); ++v)
        if (lowp_conv(model, v, false, path)) {
          const HalfType t = model.op(v).dtype == DType::F16 ? HalfType::F16 : HalfType::BF16;
          if (conv2d_lowp_available(t, conv_geom(model, v), probe)) {
            conv_ws = std::max(conv_ws, conv2d_lowp_workspace_bytes(t, conv_geom(model, v), probe));
            continue;
          }
          state_.conv_f32[static_cast<std::size_t>(v)] = 1;
          std::cerr << "remat: note: " << op_label(model, v) << ": cuDNN offers no deterministic "
                    << dtype_name(model.op(v).dtype) << " algorithm for this convolution; it runs in f32\n";
          conv_ws = std::max(conv_ws, conv2d_workspace_bytes(conv_geom(model, v), probe));
        } else if (model.op(v).kind == OpKind::Conv)
          conv_ws = std::max(conv_ws, conv2d_workspace_bytes(conv_geom(model, v), probe));
        else if (model.op(v).kind == OpKind::ConvTranspose)
          conv_ws = std::max(conv_ws, conv2d_workspace_bytes(conv_transpose_geom(model, v), probe));
      state_.conv_workspace = hold(conv_ws, MemoryUse::Workspace, "the convolution workspace");
      nondeterministic_ = nondeterministic_report(model, state_, probe);
      state_.conv_workspace_bytes = conv_ws;
      grads_bytes_ = grads ? 4 * floats : 0;
      if (grads) CUDA_CHECK_THROW(cudaMemsetAsync(grads, 0, grads_bytes_, state_.stream));
      CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));  // the host vectors may go now
    } catch (...) {
      drop_baseline();
      throw;
    }
    model_size_ = model.size();
    loaded_ = true;
    reset_peaks();
  });
}

void CudaBackend::zero_param_grads() {
  guarded([&] {
    if (grads_bytes_) CUDA_CHECK_THROW(cudaMemsetAsync(state_.grads.front(), 0, grads_bytes_, state_.stream));
  });
}

// ---- Memory -----------------------------------------------------------------------

void* CudaBackend::allocate(uint64_t bytes) {
  return guarded([&] { return pool_->allocate(bytes, MemoryUse::Tensor); });
}

void CudaBackend::release(void* p) {
  if (!pool_->asked_bytes(p, MemoryUse::Tensor)) return;
  if (const auto it = offloading_.find(p); it != offloading_.end()) {
    // An offload still reads it: freed after that copy, without stalling the compute.
    (void)cudaEventDestroy(it->second);
    offloading_.erase(it);
    pool_->release_on(p, copy_stream_);
    return;
  }
  if (const auto it = fetching_.find(p); it != fetching_.end()) {
    // Fetched but never read: the copy must land before the bytes go back.
    (void)cudaStreamWaitEvent(state_.stream, it->second, 0);
    (void)cudaEventDestroy(it->second);
    fetching_.erase(it);
  }
  pool_->release(p);
}

// ---- Host tier ------------------------------------------------------------------

cudaEvent_t CudaBackend::record_on(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK_THROW(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK_THROW(cudaEventRecord(e, stream));
  return e;
}

void CudaBackend::drop_copy_events() {
  for (auto* m : {&offloading_, &fetching_, &host_reads_}) {
    for (auto& [p, e] : *m) (void)cudaEventDestroy(e);
    m->clear();
  }
}

void* CudaBackend::allocate_host(uint64_t bytes) {
  return guarded([&] { return host_pool_->allocate(bytes); });
}

void CudaBackend::release_host(void* p) {
  cudaEvent_t reading = nullptr;
  if (const auto it = host_reads_.find(p); it != host_reads_.end()) {
    reading = it->second;
    host_reads_.erase(it);
  }
  host_pool_->release(p, reading);  // reused only once the fetch reading it is done
}

void CudaBackend::copy_to_host(void* host, const void* device, uint64_t bytes) {
  guarded([&] {
    cudaEvent_t written = record_on(state_.stream);  // the compute that made the tensor
    CUDA_CHECK_THROW(cudaStreamWaitEvent(copy_stream_, written, 0));
    (void)cudaEventDestroy(written);  // released once it completes
    if (bytes) CUDA_CHECK_THROW(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, copy_stream_));
    // Fetched and offloaded again unread: this copy follows the fetch's on the
    // copy stream, so its event is done with (left, it would leak and stay
    // keyed to an address the pool hands out again).
    if (const auto it = fetching_.find(device); it != fetching_.end()) {
      (void)cudaEventDestroy(it->second);
      fetching_.erase(it);
    }
    offloading_[device] = record_on(copy_stream_);
  });
}

void CudaBackend::copy_to_device(void* device, const void* host, uint64_t bytes) {
  guarded([&] {
    cudaEvent_t allocated = record_on(state_.stream);  // the pool handed `device` out in this stream's order
    CUDA_CHECK_THROW(cudaStreamWaitEvent(copy_stream_, allocated, 0));
    (void)cudaEventDestroy(allocated);
    if (bytes) CUDA_CHECK_THROW(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy_stream_));
    fetching_[device] = record_on(copy_stream_);
    host_reads_[host] = record_on(copy_stream_);
  });
}

void CudaBackend::wait_for_copy(const void* device) {
  const auto it = fetching_.find(device);
  if (it == fetching_.end()) return;
  guarded([&] { CUDA_CHECK_THROW(cudaStreamWaitEvent(state_.stream, it->second, 0)); });
  (void)cudaEventDestroy(it->second);
  fetching_.erase(it);
}

uint64_t CudaBackend::live_bytes() const { return pool_->asked_bytes(MemoryUse::Tensor); }
uint64_t CudaBackend::peak_bytes() const { return pool_->tensor_peak_bytes(); }

void CudaBackend::begin_strategy() {
  guarded([&] {
    // Offloaded tensors were freed in the copy stream's order: those frees
    // must have run before the trim can hand their memory back.
    let_go();
    CUDA_CHECK_THROW(cudaStreamSynchronize(copy_stream_));
    pool_->trim();
    host_pool_->trim();
    reset_peaks();
  });
  loss_scale_ = initial_loss_scale_;
}

void CudaBackend::reset_peaks() {
  guarded([&] {
    pool_->reset_peaks();
    host_pool_->reset_peaks();
  });
}

MemoryStats CudaBackend::memory_stats() const {
  MemoryStats s = interval_stats();
  size_t free_now = 0, total = 0;
  if (cudaMemGetInfo(&free_now, &total) == cudaSuccess) s.device_used = total - free_now;
  else (void)cudaGetLastError();
  return s;
}

MemoryStats CudaBackend::interval_stats() const {
  MemoryStats s;
  s.allocator_peak = pool_->used_high_bytes();
  s.reserved_peak = pool_->reserved_high_bytes();
  s.baseline = pool_->asked_bytes(MemoryUse::Baseline);
  s.tensors = pool_->tensor_peak_bytes();
  s.scratch = pool_->asked_bytes(MemoryUse::Scratch);
  s.workspace = pool_->asked_bytes(MemoryUse::Workspace);
  return s;
}

uint64_t CudaBackend::device_free_bytes() const {
  size_t free_now = 0, total = 0;
  if (!pool_ || cudaMemGetInfo(&free_now, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::numeric_limits<uint64_t>::max();
  }
  return free_now + pool_->unused_reserved_bytes();
}

std::string CudaBackend::recover(const Model& model, const HostData& data) {
  if (healthy_) return {};
  destroy();
  // cudaDeviceReset may return the sticky error of the fault it clears: what
  // counts is whether the device works afterwards.
  const cudaError_t reset = cudaDeviceReset();
  (void)cudaGetLastError();
  // The driver tears the faulted context down asynchronously; until it has, a
  // new one is refused (cudaErrorDevicesUnavailable). Wait for it, a while.
  cudaError_t ready = cudaErrorDevicesUnavailable;
  for (int attempt = 0; attempt < 40 && ready != cudaSuccess; ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ready = cudaSetDevice(device_);
    if (ready == cudaSuccess) ready = cudaFree(nullptr);  // creates the context now
    (void)cudaGetLastError();
  }
  if (ready != cudaSuccess)
    return std::string("cudaDeviceReset: ") + cudaGetErrorName(reset) + ", then no new context for 2 s: " +
           cudaGetErrorName(ready) + " (" + cudaGetErrorString(ready) + ")";
  try {
    create();
    load(model, data);
  } catch (const std::exception& e) {
    healthy_ = false;
    return std::string("after cudaDeviceReset: ") + e.what();
  }
  return {};
}

void CudaBackend::upload(void* dst, const void* src, uint64_t bytes) {
  // Pageable source: the call returns once the bytes are staged, so the
  // caller's buffer may change afterwards.
  guarded([&] {
    if (bytes) CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state_.stream));
  });
}

void CudaBackend::copy(void* dst, const void* src, uint64_t bytes) {
  guarded([&] {
    if (bytes) CUDA_CHECK_THROW(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state_.stream));
  });
}

// ---- Compute --------------------------------------------------------------------

void CudaBackend::compress(void* packed, const void* f32, uint64_t elements, Packing p) {
  const auto* x = static_cast<const float*>(f32);
  const auto n = static_cast<int64_t>(elements);
  guarded([&] {
    switch (p) {
      case Packing::BF16: f32_to_bf16(x, static_cast<uint16_t*>(packed), n, state_.stream); break;
      case Packing::F16: f32_to_f16(x, static_cast<uint16_t*>(packed), n, state_.stream); break;
      case Packing::Int8: f32_to_int8(x, packed, n, state_.stream); break;
      case Packing::None:
        CUDA_CHECK_THROW(cudaMemcpyAsync(packed, f32, 4 * elements, cudaMemcpyDeviceToDevice, state_.stream));
        break;
    }
  });
}

void CudaBackend::decompress(void* f32, const void* packed, uint64_t elements, Packing p) {
  auto* y = static_cast<float*>(f32);
  const auto n = static_cast<int64_t>(elements);
  guarded([&] {
    switch (p) {
      case Packing::BF16: bf16_to_f32(static_cast<const uint16_t*>(packed), y, n, state_.stream); break;
      case Packing::F16: f16_to_f32(static_cast<const uint16_t*>(packed), y, n, state_.stream); break;
      case Packing::Int8: int8_to_f32(packed, y, n, state_.stream); break;
      case Packing::None:
        CUDA_CHECK_THROW(cudaMemcpyAsync(f32, packed, 4 * elements, cudaMemcpyDeviceToDevice, state_.stream));
        break;
    }
  });
}

namespace {

// A mixed-precision call's f32 copies, from the device pool in stream order
// (measured as scratch), given back after the call: later work on the same
// stream reuses them only after this call's kernels. The device's free bytes
// are asked only when an allocation fails, for the message: cudaMemGetInfo
// costs tens of microseconds, and a bf16 step makes a mixed call per
// instruction (asked up front: the likely reason a bf16 ResNet-50 step took
// about 50 ms at batch 16, 32 and 64 alike on the H100, docs/gpu.md).
class DeviceCallScratch final : public MixedScratch {
 public:
  DeviceCallScratch(DevicePool& pool, const CudaBackend& backend) : pool_(pool), backend_(backend) {}
  ~DeviceCallScratch() override { give_back_all(); }
  float* take(int64_t floats) override {
    const uint64_t bytes = 4 * static_cast<uint64_t>(std::max<int64_t>(floats, 1));
    void* p = pool_.allocate(bytes, MemoryUse::Scratch);
    if (!p)
      throw DeviceOutOfMemory("the cuda backend could not allocate " + std::to_string(bytes) +
                                  " bytes of mixed-precision scratch",
                              bytes, backend_.device_free_bytes());
    held_.push_back(p);
    return static_cast<float*>(p);
  }
  void give_back_all() override {
    for (void* p : held_) pool_.release(p);
    held_.clear();
  }

 private:
  DevicePool& pool_;
  const CudaBackend& backend_;
  std::vector<void*> held_;
};

}  // namespace

void CudaBackend::forward(const Model& m, int v, const TensorTable& t) {
  if (!loaded_ || m.size() != model_size_) throw InternalError("cuda backend: forward before load() of this model");
  // A view computes nothing forward (the executor points it into its input's
  // storage); in a mixed model its call would widen that storage for nothing:
  // a kernel and a scratch buffer for each of a Llama's head reshapes.
  if (m.op(v).view) return;
  guarded([&] {
    if (runs_mixed(m, v)) {
      DeviceCallScratch scratch(*pool_, *this);
      return mixed_forward(state_, m, v, t, scratch);
    }
    OpCall c(m, v, t);
    dense_input(state_, c, false);
    cuda_forward(state_, c);
  });
}

void CudaBackend::backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) {
  if (!loaded_ || m.size() != model_size_) throw InternalError("cuda backend: backward before load() of this model");
  guarded([&] {
    const float seed = v == m.loss() ? loss_scale_ : 1.0f;
    if (seed != 1.0f || runs_mixed(m, v)) {
      DeviceCallScratch scratch(*pool_, *this);
      return mixed_backward(state_, m, v, t, acc, scratch, seed);
    }
    OpCall c(m, v, t, acc);
    dense_input(state_, c, true);
    cuda_backward(state_, c);
  });
}

// ---- Read back ------------------------------------------------------------------

float CudaBackend::read_loss() {
  return guarded([&] {
    let_go();
    float loss = 0;
    CUDA_CHECK_THROW(cudaMemcpyAsync(&loss, state_.loss, sizeof loss, cudaMemcpyDeviceToHost, state_.stream));
    CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));
    return loss;
  });
}

std::vector<float> CudaBackend::read_param_grad(std::size_t index) {
  return guarded([&] {
    let_go();
    std::vector<float> out(static_cast<std::size_t>(numel_.at(index)));
    if (!out.empty())
      CUDA_CHECK_THROW(cudaMemcpyAsync(out.data(), state_.grads[index], 4 * out.size(), cudaMemcpyDeviceToHost,
                                       state_.stream));
    CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));
    // Unscaled (a power of two: exact), as GradScaler's unscale_.
    if (loss_scale_ != 1.0f)
      for (float& x : out) x *= 1.0f / loss_scale_;
    return out;
  });
}

// ---- Synchronisation and timing -------------------------------------------------

void CudaBackend::let_go() {
  if (gated_) gated_->open();
}

void CudaBackend::synchronize() {
  guarded([&] {
    let_go();
    CUDA_CHECK_THROW(cudaStreamSynchronize(state_.stream));
    CUDA_CHECK_THROW(cudaStreamSynchronize(copy_stream_));
  });
}

void CudaBackend::begin_marks(std::size_t count) {
  guarded([&] { gated_ ? gated_->begin(count) : timer_->begin(count); });
}

void CudaBackend::mark(std::size_t index) {
  guarded([&] { gated_ ? gated_->record(index) : timer_->record(index); });
}

std::vector<double> CudaBackend::mark_times_ms() {
  return guarded([&] {
    if (!gated_) return timer_->elapsed_ms();
    std::vector<double> ms = gated_->elapsed_ms();
    if (const int n = gated_->timeouts())
      std::cerr << "remat: warning: REMAT_CUDA_GATE: " << n << " instruction(s) waited for the device inside "
                << "themselves; the gate let go after " << GatedTimer::kLimitNs / 1'000'000'000
                << " s and their times include that wait\n";
    return ms;
  });
}

}  // namespace remat::cuda
