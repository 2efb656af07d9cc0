// What the gradient-sharing tests (test_add_gradient_exec.cpp,
// test_view_gradient_exec.cpp) check on the executor: which buffer each
// backward was handed, tracked bytes against the simulator's at every
// instruction, and every strategy's gradients against store-all's.
#pragma once
#include <cstring>
#include <initializer_list>
#include <map>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "core/exec/forwarding_backend.h"
#include "tests/exec/exec_test_util.h"

namespace remat::testing {

// Records G's pointer per op as each backward reads or writes it, and the
// tracked bytes at every mark.
class GradPointers : public WrappedBackend, public ForwardingCompute, public ForwardingTiming {
 public:
  explicit GradPointers(Backend& inner)
      : WrappedBackend(inner), ForwardingCompute(inner.compute()), ForwardingTiming(inner.timing()) {}
  Compute& compute() override { return *this; }
  Timing& timing() override { return *this; }
  std::map<int, const void*> dy;                  // op -> G(op) when bwd op read it
  std::map<std::pair<int, int>, const void*> dx;  // (bwd op, input) -> the G it was handed
  std::vector<uint64_t> live;

  void begin_marks(std::size_t count) override {
    live.clear();
    ForwardingTiming::begin_marks(count);
  }
  void mark(std::size_t index) override {
    live.push_back(inner().memory().live_bytes());
    ForwardingTiming::mark(index);
  }
  void backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) override {
    dy[v] = t.grad[static_cast<std::size_t>(v)];
    for (int u : m.op(v).inputs) dx[{v, u}] = t.grad[static_cast<std::size_t>(u)];
    ForwardingCompute::backward(m, v, t, acc);
  }
};

// Tracked bytes after each instruction are the simulator's; returns the simulation.
inline Simulation expect_tracked_is_simulated(const GradPointers& rec, const Model& m, const Schedule& s) {
  const Simulation sim = simulate(m, s);
  EXPECT_EQ(rec.live.size(), s.code.size() + 1);
  for (std::size_t i = 0; i < s.code.size() && i + 1 < rec.live.size(); ++i)
    EXPECT_EQ(rec.live[i + 1], sim.timeline[i]) << "instruction " << i << ": " << to_string(s.code[i], m);
  return sim;
}

// Every strategy runs with its tracked peak the predicted one and gives
// store-all's loss and gradients bit for bit.
inline void expect_store_alls_gradients(const Model& m, std::initializer_list<const char*> specs) {
  CpuBackend cpu;
  const ExecResult base = execute(m, schedule_of(m, "store-all"), cpu, quick());
  ASSERT_TRUE(base.ok()) << base.message;
  for (const char* spec : specs) {
    SCOPED_TRACE(spec);
    const Schedule s = schedule_of(m, spec);
    const ExecResult r = execute(m, s, cpu, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.tracked_peak_bytes, simulate(m, s).peak_bytes);
    EXPECT_EQ(std::memcmp(&r.loss, &base.loss, sizeof(float)), 0);
    EXPECT_EQ(r.grad_hash, base.grad_hash);
  }
}

}  // namespace remat::testing
