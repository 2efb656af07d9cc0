#include "core/exec/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "core/base/errors.h"
#include "core/exec/cpu_mixed.h"
#include "core/kernels/convert.h"

namespace remat {
namespace {

// A "key: N kB" line of a /proc file in bytes; `otherwise` when it is not there.
uint64_t proc_kib(const char* file, const char* key, uint64_t otherwise) {
  std::ifstream in(file);
  std::string k;
  while (in >> k) {
    if (k == key) {
      uint64_t kib = 0;
      if (in >> kib) return kib * 1024;
      return otherwise;
    }
    in.ignore(1 << 12, '\n');
  }
  return otherwise;
}

// The resident set of this process (VmRSS): the operating system's own view.
uint64_t resident_set_bytes() { return proc_kib("/proc/self/status", "VmRSS:", 0); }

// A mixed-precision call's f32 copies, from the backend's allocator (its
// measured figures include them, as scratch), given back after the call.
class CallScratch final : public MixedScratch {
 public:
  explicit CallScratch(HostAllocator& alloc) : alloc_(alloc) {}
  ~CallScratch() override { give_back_all(); }
  float* take(int64_t floats) override {
    const uint64_t bytes = 4 * static_cast<uint64_t>(std::max<int64_t>(floats, 1));
    void* p = alloc_.allocate(bytes, MemoryUse::Scratch);
    if (!p)
      throw DeviceOutOfMemory("the cpu backend could not allocate " + std::to_string(bytes) +
                                  " bytes of mixed-precision scratch",
                              bytes, alloc_.free_bytes());
    held_.push_back(p);
    return static_cast<float*>(p);
  }
  void give_back_all() override {
    for (void* p : held_) alloc_.release(p);
    held_.clear();
  }

 private:
  HostAllocator& alloc_;
  std::vector<void*> held_;
};

}  // namespace

CpuBackend::CpuBackend(HostAllocator::Options memory)
    : alloc_(memory), host_alloc_(HostAllocator::Options{.exact = memory.exact}) {}

CpuBackend::~CpuBackend() { drop_baseline(); }

void CpuBackend::drop_baseline() {
  for (void* p : held_) alloc_.release(p);
  held_.clear();
  const GemmMode mode = state_.gemm_mode, conv = state_.conv_mode;  // settings, not buffers
  const uint64_t calls = state_.lowp_calls, conv_calls = state_.lowp_conv_calls;
  const PointwiseMode pw = state_.pointwise_mode;
  const uint64_t io_calls = state_.io_calls;
  state_ = CpuOpState{};
  state_.gemm_mode = mode;
  state_.conv_mode = conv;
  state_.lowp_calls = calls;
  state_.pointwise_mode = pw;
  state_.io_calls = io_calls;
  state_.lowp_conv_calls = conv_calls;
  numel_.clear();
  baseline_bytes_ = 0;
}

float* CpuBackend::hold(uint64_t bytes, MemoryUse use, const char* what) {
  if (bytes == 0) return nullptr;
  void* p = alloc_.allocate(bytes, use);
  if (!p)
    throw DeviceOutOfMemory(std::string("the cpu backend could not allocate ") + std::to_string(bytes) +
                                " bytes for " + what,
                            bytes, alloc_.free_bytes());
  held_.push_back(p);
  return static_cast<float*>(p);
}

void CpuBackend::load(const Model& model, const HostData& data) {
  const auto tensors = parameter_tensors(model);
  if (data.params.size() != tensors.size()) throw InputError("cpu backend: parameter count does not match the model");
  for (std::size_t k = 0; k < tensors.size(); ++k)
    if (static_cast<int64_t>(data.params[k].size()) != tensors[k].numel())
      throw InputError("cpu backend: parameter " + tensors[k].name + " has the wrong size");
  drop_baseline();
  alloc_.trim();
  state_.param_slots = ParamSlots(model);
  uint64_t bytes = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const uint64_t n = data.params[k].size();
    numel_.push_back(n);
    float* p = hold(4 * n, MemoryUse::Baseline, "the parameters");
    float* g = hold(4 * n, MemoryUse::Baseline, "the parameter gradients");
    if (n) std::memcpy(p, data.params[k].data(), 4 * n);
    state_.params.push_back(p);
    state_.grads.push_back(g);
    bytes += 2 * 4 * n;
  }
  state_.target_n = data.target.size();
  state_.labels_n = data.labels.size();
  float* target = hold(4 * state_.target_n, MemoryUse::Baseline, "the target");
  auto* labels = reinterpret_cast<int32_t*>(hold(4 * state_.labels_n, MemoryUse::Baseline, "the labels"));
  if (state_.target_n) std::memcpy(target, data.target.data(), 4 * state_.target_n);
  if (state_.labels_n) std::memcpy(labels, data.labels.data(), 4 * state_.labels_n);
  state_.target = target;
  state_.labels = labels;
  (void)hold(4, MemoryUse::Baseline, "the loss");  // the loss scalar, as on CUDA (state_.loss holds the value)
  state_.seed = data.seed;
  state_.consts.assign(static_cast<std::size_t>(model.size()), nullptr);
  for (int v = 0; v < model.size(); ++v) {
    const std::vector<uint8_t> c = constant_bytes(model.op(v));
    if (c.empty()) continue;
    void* p = hold(c.size(), MemoryUse::Baseline, "the constants");
    std::memcpy(p, c.data(), c.size());
    state_.consts[static_cast<std::size_t>(v)] = p;
    bytes += c.size();
  }
  baseline_bytes_ = bytes + 4 * state_.target_n + 4 * state_.labels_n + 4;
  initial_loss_scale_ = loss_scale_ = uses_f16(model) ? kF16LossScale : 1.0f;
  const ScratchFloats scratch = model_scratch(model);
  for (int i = 0; i < kScratchSlots; ++i)
    state_.scratch[i] = hold(4 * static_cast<uint64_t>(scratch[i]), MemoryUse::Scratch, "backward scratch");
  zero_param_grads();
  reset_peaks();
}

void CpuBackend::zero_param_grads() {
  for (std::size_t k = 0; k < state_.grads.size(); ++k)
    if (numel_[k]) std::memset(state_.grads[k], 0, 4 * numel_[k]);
}

void* CpuBackend::allocate(uint64_t bytes) {
  void* p = alloc_.allocate(bytes, MemoryUse::Tensor);
  if (!p) return nullptr;
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return p;
}

void CpuBackend::release(void* p) {
  // Only tracked tensors: a stray baseline pointer must not be freed under the kernels.
  const auto asked = alloc_.asked_bytes(p, MemoryUse::Tensor);
  if (!asked) return;
  alloc_.release(p);
  live_ -= *asked;
}

void* CpuBackend::allocate_host(uint64_t bytes) {
  void* p = host_alloc_.allocate(bytes, MemoryUse::Tensor);
  if (!p) return nullptr;
  host_live_ += bytes;
  host_peak_ = std::max(host_peak_, host_live_);
  return p;
}

void CpuBackend::release_host(void* p) {
  const auto asked = host_alloc_.asked_bytes(p, MemoryUse::Tensor);
  if (!asked) return;
  host_alloc_.release(p);
  host_live_ -= *asked;
}

void CpuBackend::copy_to_host(void* host, const void* device, uint64_t bytes) { std::memcpy(host, device, bytes); }

void CpuBackend::copy_to_device(void* device, const void* host, uint64_t bytes) { std::memcpy(device, host, bytes); }

void CpuBackend::compress(void* packed, const void* f32, uint64_t elements, Packing p) {
  const auto* x = static_cast<const float*>(f32);
  const auto n = static_cast<int64_t>(elements);
  switch (p) {
    case Packing::BF16: cpu::f32_to_bf16(x, static_cast<uint16_t*>(packed), n); break;
    case Packing::F16: cpu::f32_to_f16(x, static_cast<uint16_t*>(packed), n); break;
    case Packing::Int8: cpu::f32_to_int8(x, packed, n); break;
    case Packing::None: std::memcpy(packed, f32, 4 * elements); break;
  }
}

void CpuBackend::decompress(void* f32, const void* packed, uint64_t elements, Packing p) {
  auto* y = static_cast<float*>(f32);
  const auto n = static_cast<int64_t>(elements);
  switch (p) {
    case Packing::BF16: cpu::bf16_to_f32(static_cast<const uint16_t*>(packed), y, n); break;
    case Packing::F16: cpu::f16_to_f32(static_cast<const uint16_t*>(packed), y, n); break;
    case Packing::Int8: cpu::int8_to_f32(packed, y, n); break;
    case Packing::None: std::memcpy(f32, packed, 4 * elements); break;
  }
}

void CpuBackend::begin_strategy() {
  loss_scale_ = initial_loss_scale_;
  alloc_.trim();
  host_alloc_.trim();
  reset_peaks();
}

void CpuBackend::reset_peaks() {
  peak_ = live_;
  alloc_.reset_peaks();
  host_peak_ = host_live_;
  host_alloc_.reset_peaks();
}

MemoryStats CpuBackend::memory_stats() const {
  MemoryStats s = alloc_.stats();
  s.device_used = resident_set_bytes();
  return s;
}

// What the allocator may still hand out: its capacity, and the memory the
// system says is available (what a failing malloc would hit first).
uint64_t CpuBackend::device_free_bytes() const {
  const uint64_t available = proc_kib("/proc/meminfo", "MemAvailable:", std::numeric_limits<uint64_t>::max());
  return std::min(alloc_.free_bytes(), available);
}

void CpuBackend::upload(void* dst, const void* src, uint64_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy(void* dst, const void* src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

// A strided input of a kernel that reads rows, copied dense first (dense_copy):
// into scratch, or into aux(v) for a Linear's charged copy, which the backward
// reads again. The mixed-precision path calls it on its widened call too.
void cpu_dense_input(CpuOpState& s, OpCall& c, bool backward) {
  const DenseCopy d = dense_copy(c.model, c.v);
  if (d == DenseCopy::None || (backward && !dense_copy_in_backward(c.model, c.v))) return;
  float* to = d == DenseCopy::Aux ? c.aux() : s.scratch[kDenseInput];
  if (!(backward && d == DenseCopy::Aux)) {
    const float* x[3] = {c.in(0), nullptr, nullptr};
    cpu::pointwise_fwd(dense_copy_geom(c.model, c.op.inputs[0]), x, to);
  }
  c.set_dense_in0(to);
}

void CpuBackend::forward(const Model& m, int v, const TensorTable& t) {
  // A view computes nothing forward (the executor points it into its input's
  // storage); in a mixed model its call would widen that storage for nothing.
  if (m.op(v).view) return;
  if (runs_mixed(m, v)) {
    ++mixed_calls_;
    CallScratch scratch(alloc_);
    return mixed_forward(state_, m, v, t, scratch);
  }
  OpCall c(m, v, t);
  cpu_dense_input(state_, c, false);
  cpu_forward(state_, c);
}

void CpuBackend::backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) {
  const float seed = v == m.loss() ? loss_scale_ : 1.0f;
  if (seed != 1.0f || runs_mixed(m, v)) {
    ++mixed_calls_;
    CallScratch scratch(alloc_);
    return mixed_backward(state_, m, v, t, acc, scratch, seed);
  }
  OpCall c(m, v, t, acc);
  cpu_dense_input(state_, c, true);
  cpu_backward(state_, c);
}

std::vector<float> CpuBackend::read_param_grad(std::size_t index) {
  const uint64_t n = numel_.at(index);
  std::vector<float> g(state_.grads[index], state_.grads[index] + n);
  // GradScaler's unscale_: times the inverse, exact for a power of two.
  if (loss_scale_ != 1.0f)
    for (float& x : g) x *= 1.0f / loss_scale_;
  return g;
}

void CpuBackend::begin_marks(std::size_t count) { marks_.assign(count, {}); }

void CpuBackend::mark(std::size_t index) { marks_[index] = std::chrono::steady_clock::now(); }

std::vector<double> CpuBackend::mark_times_ms() {
  std::vector<double> out(marks_.size(), 0.0);
  for (std::size_t i = 0; i < marks_.size(); ++i)
    out[i] = std::chrono::duration<double, std::milli>(marks_[i] - marks_[0]).count();
  return out;
}

}  // namespace remat
