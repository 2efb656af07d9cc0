// The Backend interface from the outside, as every backend must honour it:
// memory the device cannot provide is an out-of-memory result wherever it is
// asked for (a tracked tensor, the baseline, a kernel's scratch or workspace),
// a bad schedule is a failed result that does not stop the other strategies,
// and a device that faulted is recovered or the rest is reported as not run.
// The CPU backend's allocator with a capacity plays the small device.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/forwarding_backend.h"
#include "core/exec/op_exec.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::cpu_held_bytes;
using testing::quick;
using testing::rounded_tensor_peak;
using testing::schedule_of;

HostAllocator::Options capacity(uint64_t bytes) {
  HostAllocator::Options o;
  o.exact = false;
  o.capacity = bytes;
  return o;
}

TEST(BackendContract, TensorAllocationFailureIsOutOfMemory) {
  const Model m = make_preset("mlp:6:32:4");
  const Schedule store = schedule_of(m, "store-all"), rec = schedule_of(m, "recompute-all");
  // Room for the baseline, the scratch and recompute-all's tensors, as the allocator rounds them.
  const uint64_t room = cpu_held_bytes(m, false) + rounded_tensor_peak(m, rec, false);
  ASSERT_GT(rounded_tensor_peak(m, store, false), rounded_tensor_peak(m, rec, false));
  CpuBackend dev(capacity(room));
  const auto runs = execute_strategies(m, {store, rec}, dev, quick());
  ASSERT_EQ(runs[0].status, ExecStatus::OutOfMemory) << runs[0].message;
  EXPECT_EQ(runs[0].backend, "cpu");
  // The failing instruction is one whose tensors went past the room: before it, store-all fit.
  // The failing instruction is the first whose tensors, as allocated, go past the room.
  const Simulation allocated = simulate(testing::allocated_model(m, false), store);
  const uint64_t for_tensors = room - cpu_held_bytes(m, false);
  const auto at = static_cast<std::size_t>(runs[0].oom_instruction);
  EXPECT_GT(allocated.timeline[at], for_tensors);
  for (std::size_t i = 0; i < at; ++i) EXPECT_LE(allocated.timeline[i], for_tensors) << i;
  EXPECT_NE(runs[0].message.find("free on the device"), std::string::npos) << runs[0].message;
  EXPECT_LE(runs[0].oom_free, runs[0].oom_needed + 63);  // it did not fit, rounded to 64
  ASSERT_TRUE(runs[1].ok()) << runs[1].message;
  EXPECT_EQ(runs[1].tracked_peak_bytes, simulate(m, rec).peak_bytes);
  EXPECT_EQ(dev.live_bytes(), 0u);
}

TEST(BackendContract, BaselineThatCannotFitIsOutOfMemoryForEveryStrategy) {
  const Model m = make_preset("mlp:4:64:8");
  const uint64_t baseline = baseline_bytes_of(m);
  {
    // Less than the baseline itself: refused before anything is generated.
    CpuBackend dev(capacity(baseline - 1));
    const auto runs = execute_strategies(m, {schedule_of(m, "store-all"), schedule_of(m, "sqrt")}, dev, quick());
    ASSERT_EQ(runs.size(), 2u);
    for (const auto& r : runs) {
      EXPECT_EQ(r.status, ExecStatus::OutOfMemory);
      EXPECT_EQ(r.oom_needed, baseline);
      EXPECT_EQ(r.oom_instruction, -1);
      EXPECT_NE(r.message.find("the baseline"), std::string::npos) << r.message;
    }
  }
  {
    // The baseline as asked fits, but not as the allocator rounds it plus the scratch: load() fails.
    CpuBackend dev(capacity(baseline));
    ASSERT_GT(cpu_held_bytes(m, false), baseline);
    HostData data;
    const auto runs = execute_strategies(m, {schedule_of(m, "store-all")}, dev, quick(), &data);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, ExecStatus::OutOfMemory) << runs[0].message;
    EXPECT_NE(runs[0].message.find("before the first instruction"), std::string::npos) << runs[0].message;
    EXPECT_FALSE(data.params.empty());  // generated: the shortfall was only found while loading
  }
}

// A kernel that needs memory of its own (a library workspace) and cannot have it.
class WorkspaceFailsAt final : public WrappedBackend, public ForwardingCompute {
 public:
  WorkspaceFailsAt(Backend& inner, int op) : WrappedBackend(inner), ForwardingCompute(inner.compute()), op_(op) {}
  Compute& compute() override { return *this; }
  void backward(const Model& m, int op, const TensorTable& t, std::span<const uint8_t> acc) override {
    if (op == op_) throw DeviceOutOfMemory("a GEMM workspace", 1000, 10);
    ForwardingCompute::backward(m, op, t, acc);
  }

 private:
  int op_;
};

TEST(BackendContract, KernelMemoryFailureIsOutOfMemoryAtItsInstruction) {
  const Model m = make_preset("mlp:3:16:4");
  const Schedule s = schedule_of(m, "store-all");
  const int victim = 2;
  CpuBackend cpu;
  WorkspaceFailsAt dev(cpu, victim);
  const auto runs = execute_strategies(m, {s}, dev, quick());
  ASSERT_EQ(runs[0].status, ExecStatus::OutOfMemory) << runs[0].message;
  const auto at = static_cast<std::size_t>(runs[0].oom_instruction);
  EXPECT_EQ(s.code[at], (Instr{InstrKind::Bwd, victim}));
  EXPECT_EQ(runs[0].oom_needed, 1000u);
  EXPECT_EQ(runs[0].oom_free, 10u);
  EXPECT_NE(runs[0].message.find("a GEMM workspace"), std::string::npos) << runs[0].message;
  EXPECT_EQ(cpu.live_bytes(), 0u);
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

// A device that faults once at op `at` and stays broken until recovered (as a
// CUDA context after an illegal address), or for good when it cannot recover.
class FaultyDevice final : public WrappedBackend, public ForwardingCompute, public ForwardingTiming {
 public:
  FaultyDevice(Backend& inner, int at, bool can_recover)
      : WrappedBackend(inner), ForwardingCompute(inner.compute()), ForwardingTiming(inner.timing()), at_(at),
        can_recover_(can_recover) {}
  Compute& compute() override { return *this; }
  Timing& timing() override { return *this; }
  void forward(const Model& m, int op, const TensorTable& t) override {
    if (broken_) throw DeviceFault("the device is unusable");
    if (op == at_ && !faulted_) {
      faulted_ = broken_ = true;
      throw DeviceFault("an illegal memory access was encountered");
    }
    ForwardingCompute::forward(m, op, t);
  }
  bool healthy() const override { return !broken_; }
  std::string recover(const Model& m, const HostData& d) override {
    ++recoveries;
    if (!can_recover_) return "the reset failed";
    broken_ = false;
    load(m, d);
    return {};
  }
  int recoveries = 0;

 private:
  int at_;
  bool can_recover_, faulted_ = false, broken_ = false;
};

TEST(BackendContract, FaultIsRecoveredFromOrTheRestIsNotRun) {
  const Model m = make_preset("mlp:3:16:4");
  const std::vector<Schedule> batch = {schedule_of(m, "store-all"), schedule_of(m, "sqrt"),
                                       schedule_of(m, "recompute-all")};
  for (const bool can_recover : {true, false}) {
    SCOPED_TRACE(can_recover ? "recovers" : "cannot recover");
    CpuBackend cpu;
    // store-all's warm-up runs op 2 first: it faults there, in the first strategy.
    FaultyDevice dev(cpu, 2, can_recover);
    const auto runs = execute_strategies(m, batch, dev, quick());
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0].status, ExecStatus::Failed);
    EXPECT_NE(runs[0].message.find("device fault reported at instruction"), std::string::npos) << runs[0].message;
    EXPECT_NE(runs[0].message.find("--sync-each"), std::string::npos) << runs[0].message;
    EXPECT_EQ(dev.recoveries, 1);
    for (std::size_t i = 1; i < 3; ++i) {
      if (can_recover) {
        ASSERT_TRUE(runs[i].ok()) << runs[i].message;
      } else {
        EXPECT_EQ(runs[i].status, ExecStatus::NotRun);
        EXPECT_NE(runs[i].message.find("'store-all' (the reset failed)"), std::string::npos) << runs[i].message;
      }
    }
    if (can_recover) {
      EXPECT_EQ(runs[1].grad_hash, runs[2].grad_hash);
    }
  }
}

TEST(BackendContract, SyncEachNamesTheFaultingInstruction) {
  const Model m = make_preset("mlp:3:16:4");
  const Schedule s = schedule_of(m, "store-all");
  CpuBackend cpu;
  FaultyDevice dev(cpu, 3, true);
  ExecOptions o = quick();
  o.sync_each = true;
  const auto runs = execute_strategies(m, {s}, dev, o);
  ASSERT_EQ(runs[0].status, ExecStatus::Failed);
  std::size_t at = 0;
  while (s.code[at] != Instr{InstrKind::Fwd, 3}) ++at;
  EXPECT_NE(runs[0].message.find("device fault at instruction " + std::to_string(at) + " ("), std::string::npos)
      << runs[0].message;
  EXPECT_EQ(runs[0].message.find("--sync-each"), std::string::npos) << runs[0].message;
}

// Under AddressSanitizer the CPU backend allocates exact sizes and really
// frees, so a kernel that reads a released tensor is caught; pooled, released
// blocks stay mapped for reuse and such a read would go unseen.
TEST(BackendContract, ReadOfAReleasedTensorIsCaughtUnderAddressSanitizer) {
  if (!HostAllocator::default_exact())
    GTEST_SKIP() << "built without AddressSanitizer: released blocks are kept for reuse (asan preset to check)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CpuBackend cpu;
        auto* p = static_cast<volatile float*>(cpu.allocate(256));
        cpu.release(const_cast<float*>(p));
        (void)p[3];
      },
      "heap-use-after-free");
}

// --nondeterministic-backward (ExecOptions::nondeterministic_backward): the
// executor hands the option to the backend before each load (set or
// cleared: a backend reused without it is deterministic again), and every
// result carries what the loaded backend says it ran non-deterministically.
// The stand-in device reports a line only while the option is set at load;
// its kernels are the CPU's, so the results are bitwise equal all the same.
class BackwardChoosingDevice final : public WrappedBackend, public ForwardingCompute {
 public:
  explicit BackwardChoosingDevice(Backend& inner) : WrappedBackend(inner), ForwardingCompute(inner.compute()) {}
  Compute& compute() override { return *this; }
  void allow_nondeterministic_backward(bool allow) override {
    allowed_ = allow;
    ForwardingCompute::allow_nondeterministic_backward(allow);
  }
  void load(const Model& m, const HostData& d) override {
    loaded_with.push_back(allowed_);
    ForwardingCompute::load(m, d);
  }
  std::vector<std::string> nondeterministic_backward() const override {
    return loaded_with.empty() || !loaded_with.back() ? std::vector<std::string>{}
                                                       : std::vector<std::string>{"a test kernel: any order"};
  }
  std::vector<bool> loaded_with;

 private:
  bool allowed_ = false;
};

TEST(BackendContract, NondeterministicBackwardIsHandedOverBeforeLoadAndReported) {
  const Model m = make_preset("mlp:3:16:4");
  const std::vector<Schedule> batch = {schedule_of(m, "store-all"), schedule_of(m, "sqrt")};
  CpuBackend cpu;
  BackwardChoosingDevice dev(cpu);
  ExecOptions o = quick();
  o.nondeterministic_backward = true;
  const auto with = execute_strategies(m, batch, dev, o);
  o.nondeterministic_backward = false;
  const auto without = execute_strategies(m, batch, dev, o);
  o.nondeterministic_backward = true;
  const ExecResult single = execute(m, batch[1], dev, o);
  EXPECT_EQ(dev.loaded_with, (std::vector<bool>{true, false, true}));
  ASSERT_EQ(with.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(with[i].ok()) << with[i].message;
    ASSERT_TRUE(without[i].ok()) << without[i].message;
    EXPECT_EQ(with[i].nondeterministic, std::vector<std::string>{"a test kernel: any order"});
    EXPECT_TRUE(without[i].nondeterministic.empty());
    EXPECT_EQ(with[i].param_grads, without[i].param_grads);
  }
  EXPECT_EQ(single.nondeterministic, std::vector<std::string>{"a test kernel: any order"});
  // The CPU backend has no non-deterministic algorithm: it reports none and
  // gives the same bits with the option.
  CpuBackend plain;
  const auto cpu_runs = execute_strategies(m, batch, plain, quick());
  ExecOptions asked = quick();
  asked.nondeterministic_backward = true;
  const auto cpu_asked = execute_strategies(m, batch, plain, asked);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(cpu_asked[i].nondeterministic.empty());
    EXPECT_EQ(cpu_asked[i].grad_hash, cpu_runs[i].grad_hash);
    EXPECT_EQ(cpu_asked[i].param_grads, cpu_runs[i].param_grads);
  }
}

}  // namespace
}  // namespace remat
