// The Backend interface from the outside, as the CUDA backend will use it: a
// device whose allocator fails is an out-of-memory result, a bad schedule is a
// failed result that does not stop the other strategies.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// A "device" with `cap` bytes for tracked tensors, over the CPU backend.
class SmallDevice final : public Backend {
 public:
  explicit SmallDevice(uint64_t cap) : cap_(cap) {}
  std::string name() const override { return "small"; }
  void load(const Model& m, const HostData& d) override { cpu_.load(m, d); }
  void zero_param_grads() override { cpu_.zero_param_grads(); }
  uint64_t baseline_bytes() const override { return cpu_.baseline_bytes(); }
  void* allocate(uint64_t bytes) override { return cpu_.live_bytes() + bytes > cap_ ? nullptr : cpu_.allocate(bytes); }
  void release(void* p) override { cpu_.release(p); }
  uint64_t live_bytes() const override { return cpu_.live_bytes(); }
  uint64_t peak_bytes() const override { return cpu_.peak_bytes(); }
  uint64_t device_peak_bytes() const override { return cpu_.device_peak_bytes(); }
  void reset_peaks() override { cpu_.reset_peaks(); }
  uint64_t device_free_bytes() const override { return cap_ - cpu_.live_bytes(); }
  void upload(void* dst, const void* src, uint64_t bytes) override { cpu_.upload(dst, src, bytes); }
  void forward(const Model& m, int op, const TensorTable& t) override { cpu_.forward(m, op, t); }
  void backward(const Model& m, int op, const TensorTable& t, std::span<const uint8_t> a) override {
    cpu_.backward(m, op, t, a);
  }
  float read_loss() override { return cpu_.read_loss(); }
  std::vector<float> read_param_grad(std::size_t i) override { return cpu_.read_param_grad(i); }
  void synchronize() override {}
  void begin_marks(std::size_t n) override { cpu_.begin_marks(n); }
  void mark(std::size_t i) override { cpu_.mark(i); }
  std::vector<double> mark_times_ms() override { return cpu_.mark_times_ms(); }

 private:
  CpuBackend cpu_;
  uint64_t cap_;
};

TEST(BackendContract, DeviceAllocationFailureIsOutOfMemory) {
  const Model m = make_preset("mlp:6:32:4");
  const Simulation store = simulate(m, schedule_of(m, "store-all"));
  const Simulation rec = simulate(m, schedule_of(m, "recompute-all"));
  SmallDevice dev(rec.peak_bytes);
  const auto runs = execute_strategies(m, {schedule_of(m, "store-all"), schedule_of(m, "recompute-all")}, dev, quick());
  ASSERT_EQ(runs[0].status, ExecStatus::OutOfMemory);
  EXPECT_EQ(runs[0].backend, "small");
  EXPECT_GT(store.peak_bytes, rec.peak_bytes);
  EXPECT_EQ(runs[0].oom_free, rec.peak_bytes - (store.timeline[static_cast<std::size_t>(runs[0].oom_instruction)] - runs[0].oom_needed));
  EXPECT_NE(runs[0].message.find("free on the device"), std::string::npos) << runs[0].message;
  ASSERT_TRUE(runs[1].ok()) << runs[1].message;
  EXPECT_EQ(runs[1].tracked_peak_bytes, rec.peak_bytes);
  EXPECT_EQ(dev.live_bytes(), 0u);
}

TEST(BackendContract, BadScheduleFailsAloneInABatch) {
  const Model m = make_preset("mlp:2:8:2");
  Schedule bad = schedule_of(m, "store-all");
  bad.code.erase(bad.code.begin());  // the first fwd is missing: reads a tensor that is not resident
  bad.strategy = "broken";
  CpuBackend cpu;
  EXPECT_THROW((void)execute(m, bad, cpu, quick()), ScheduleError);
  const auto runs = execute_strategies(m, {bad, schedule_of(m, "sqrt")}, cpu, quick());
  EXPECT_EQ(runs[0].status, ExecStatus::Failed);
  EXPECT_NE(runs[0].message.find("instruction 0"), std::string::npos) << runs[0].message;
  EXPECT_TRUE(runs[1].ok());
}

}  // namespace
}  // namespace remat
