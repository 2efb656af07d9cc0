// Decorators of a Backend, one role at a time. A decorator derives from
// WrappedBackend (every role is the inner backend's) and from the forwarding
// role it changes, returns itself for that role and overrides only what it
// watches or changes: the run recorder and the window's recording backend
// wrap DeviceMemory and Timing; tests shrink a device, take its host tier
// away or make its kernels fail on demand (Compute, HostTier, Timing).
//
//   class SlowKernels final : public WrappedBackend, public ForwardingCompute {
//    public:
//     explicit SlowKernels(Backend& b) : WrappedBackend(b), ForwardingCompute(b.compute()) {}
//     Compute& compute() override { return *this; }
//     void forward(const Model& m, int op, const TensorTable& t) override {
//       ...;
//       ForwardingCompute::forward(m, op, t);
//     }
//   };
#pragma once
#include "core/exec/backend.h"

namespace remat {

// A backend that is `inner` in every role, under its name.
class WrappedBackend : public Backend {
 public:
  explicit WrappedBackend(Backend& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  DeviceMemory& memory() override { return inner_.memory(); }
  Compute& compute() override { return inner_.compute(); }
  HostTier& host() override { return inner_.host(); }
  Timing& timing() override { return inner_.timing(); }

 protected:
  Backend& inner() const { return inner_; }

 private:
  Backend& inner_;
};

class ForwardingMemory : public DeviceMemory {
 public:
  explicit ForwardingMemory(DeviceMemory& inner) : inner_(inner) {}
  void* allocate(uint64_t bytes) override { return inner_.allocate(bytes); }
  void release(void* p) override { inner_.release(p); }
  uint64_t live_bytes() const override { return inner_.live_bytes(); }
  uint64_t peak_bytes() const override { return inner_.peak_bytes(); }
  void begin_strategy() override { inner_.begin_strategy(); }
  void reset_peaks() override { inner_.reset_peaks(); }
  MemoryStats memory_stats() const override { return inner_.memory_stats(); }
  MemoryStats interval_stats() const override { return inner_.interval_stats(); }
  uint64_t device_free_bytes() const override { return inner_.device_free_bytes(); }
  void upload(void* dst, const void* src, uint64_t bytes) override { inner_.upload(dst, src, bytes); }
  void copy(void* dst, const void* src, uint64_t bytes) override { inner_.copy(dst, src, bytes); }

 private:
  DeviceMemory& inner_;
};

class ForwardingCompute : public Compute {
 public:
  explicit ForwardingCompute(Compute& inner) : inner_(inner) {}
  void load(const Model& m, const HostData& d) override { inner_.load(m, d); }
  void zero_param_grads() override { inner_.zero_param_grads(); }
  uint64_t baseline_bytes() const override { return inner_.baseline_bytes(); }
  void forward(const Model& m, int op, const TensorTable& t) override { inner_.forward(m, op, t); }
  void backward(const Model& m, int op, const TensorTable& t, std::span<const uint8_t> acc) override {
    inner_.backward(m, op, t, acc);
  }
  float read_loss() override { return inner_.read_loss(); }
  std::vector<float> read_param_grad(std::size_t index) override { return inner_.read_param_grad(index); }
  float loss_scale() const override { return inner_.loss_scale(); }
  void back_off_loss_scale() override { inner_.back_off_loss_scale(); }
  void allow_nondeterministic_backward(bool allow) override { inner_.allow_nondeterministic_backward(allow); }
  std::vector<std::string> nondeterministic_backward() const override { return inner_.nondeterministic_backward(); }

 private:
  Compute& inner_;
};

class ForwardingHostTier : public HostTier {
 public:
  explicit ForwardingHostTier(HostTier& inner) : inner_(inner) {}
  bool has_host_tier() const override { return inner_.has_host_tier(); }
  void* allocate_host(uint64_t bytes) override { return inner_.allocate_host(bytes); }
  void release_host(void* p) override { inner_.release_host(p); }
  uint64_t host_peak_bytes() const override { return inner_.host_peak_bytes(); }
  MemoryStats host_memory_stats() const override { return inner_.host_memory_stats(); }
  void copy_to_host(void* host, const void* device, uint64_t bytes) override {
    inner_.copy_to_host(host, device, bytes);
  }
  void copy_to_device(void* device, const void* host, uint64_t bytes) override {
    inner_.copy_to_device(device, host, bytes);
  }
  void wait_for_copy(const void* device) override { inner_.wait_for_copy(device); }
  bool can_compress() const override { return inner_.can_compress(); }
  void compress(void* packed, const void* f32, uint64_t elements, Packing p) override {
    inner_.compress(packed, f32, elements, p);
  }
  void decompress(void* f32, const void* packed, uint64_t elements, Packing p) override {
    inner_.decompress(f32, packed, elements, p);
  }

 private:
  HostTier& inner_;
};

class ForwardingTiming : public Timing {
 public:
  explicit ForwardingTiming(Timing& inner) : inner_(inner) {}
  void synchronize() override { inner_.synchronize(); }
  void begin_marks(std::size_t count) override { inner_.begin_marks(count); }
  void mark(std::size_t index) override { inner_.mark(index); }
  std::vector<double> mark_times_ms() override { return inner_.mark_times_ms(); }
  bool healthy() const override { return inner_.healthy(); }
  std::string recover(const Model& m, const HostData& d) override { return inner_.recover(m, d); }

 private:
  Timing& inner_;
};

}  // namespace remat
