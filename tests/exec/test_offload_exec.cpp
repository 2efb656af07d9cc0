// Offload executed on the CPU backend's host pool: the tracked device and host
// peaks equal the simulator's (derived by hand for chain:10), the host pool's
// allocator measures its own peak, and the gradients are bitwise store-all's.
#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/exec/forwarding_backend.h"
#include "exec_test_util.h"

using namespace remat;
using namespace remat::testing;

namespace {

class NoHostTier final : public WrappedBackend, public ForwardingHostTier {
 public:
  explicit NoHostTier(Backend& inner) : WrappedBackend(inner), ForwardingHostTier(inner.host()) {}
  HostTier& host() override { return *this; }
  bool has_host_tier() const override { return false; }
};

}  // namespace

TEST(OffloadExec, Chain10TwoTiersMeasuredAndBitwiseEqual) {
  // chain:10:16: test_offload.cpp's chain:10 with 16-byte tensors: device
  // peak 7 tensors, host peak 3 (x, a3, a6 at the end of the forward pass).
  const Model m = make_preset("chain:10:16");
  const Schedule s = schedule_of(m, "offload:3");
  const Simulation sim = simulate(m, s);
  ASSERT_EQ(sim.peak_bytes, 7u * 16);
  ASSERT_EQ(sim.peak_host_bytes, 3u * 16);

  for (bool exact : {false, true}) {
    SCOPED_TRACE(exact ? "exact" : "pooled");
    CpuBackend cpu(HostAllocator::Options{.exact = exact});
    const ExecResult base = execute(m, schedule_of(m, "store-all"), cpu, quick());
    const ExecResult r = execute(m, s, cpu, quick());
    ASSERT_TRUE(base.ok()) << base.message;
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, 7u * 16);
    EXPECT_EQ(r.host_tracked_peak_bytes, 3u * 16);
    // The host pool's allocator: three blocks at its high-water mark, as asked
    // and as allocated (64-byte blocks pooled, the bytes themselves exact).
    EXPECT_EQ(r.host_memory.tensors, 3u * 16);
    EXPECT_EQ(r.host_memory.allocator_peak, 3 * cpu_block(16, exact));
    // No host tier in the store-all run.
    EXPECT_EQ(base.host_tracked_peak_bytes, 0u);
    EXPECT_EQ(base.host_memory.allocator_peak, 0u);
    // A copy changes nothing numerically.
    EXPECT_EQ(r.loss, base.loss);
    EXPECT_EQ(r.param_grads, base.param_grads);
    EXPECT_EQ(r.grad_hash, base.grad_hash);
  }
}

TEST(OffloadExec, EveryFamilyMatchesTheSimulatorAndStoreAll) {
  for (const char* spec : {"mlp:4:32:8", "transformer:2:32:8:2", "chain:12:64"}) {
    const Model m = make_preset(spec);
    CpuBackend cpu;
    const ExecResult base = execute(m, schedule_of(m, "store-all"), cpu, quick());
    ASSERT_TRUE(base.ok()) << base.message;
    for (const char* st : {"offload", "offload:2", "offload+auto", "offload+selective"}) {
      SCOPED_TRACE(std::string(spec) + " " + st);
      const Schedule s = schedule_of(m, st);
      const Simulation sim = simulate(m, s);
      const ExecResult r = execute(m, s, cpu, quick());
      ASSERT_TRUE(r.ok()) << r.message;
      EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
      EXPECT_EQ(r.host_tracked_peak_bytes, sim.peak_host_bytes);
      EXPECT_EQ(r.host_memory.tensors, sim.peak_host_bytes);
      EXPECT_EQ(r.loss, base.loss);
      EXPECT_EQ(r.grad_hash, base.grad_hash);
      EXPECT_EQ(r.param_grads, base.param_grads);
    }
  }
}

TEST(OffloadExec, BackendWithoutHostTierRefuses) {
  const Model m = make_preset("chain:10:16");
  CpuBackend cpu;
  NoHostTier dev(cpu);
  try {
    (void)execute(m, schedule_of(m, "offload:3"), dev, quick());
    FAIL() << "offload ran without a host tier";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "the cpu backend has no host tier: strategy 'offload:3' offloads tensors to host memory");
  }
  // Schedules without transfers still run on it.
  EXPECT_TRUE(execute(m, schedule_of(m, "sqrt"), dev, quick()).ok());
}
