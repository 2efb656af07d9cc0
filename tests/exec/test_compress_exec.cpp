// Compressed checkpoints executed on the CPU backend: the conversions really
// happen (every decompressed value is a bf16 / f16 / int8 value), the
// tracked peaks equal the simulator's, a run is reproducible bit for bit, and
// the loss and gradients are within a stated relative error of store-all's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/base/errors.h"
#include "core/exec/forwarding_backend.h"
#include "core/exec/same_result.h"
#include "core/kernels/convert.h"
#include "exec_test_util.h"

using namespace remat;
using namespace remat::testing;

namespace {

// Records what every decompress wrote, and whether each value is one the
// type can hold (the conversion was real).
class ConversionProbe final : public WrappedBackend, public ForwardingHostTier {
 public:
  explicit ConversionProbe(Backend& inner) : WrappedBackend(inner), ForwardingHostTier(inner.host()) {}
  HostTier& host() override { return *this; }
  int decompressed = 0;
  int64_t values = 0, not_representable = 0;
  void decompress(void* f32, const void* packed, uint64_t elements, Packing p) override {
    ForwardingHostTier::decompress(f32, packed, elements, p);
    ++decompressed;
    const auto* y = static_cast<const float*>(f32);
    float scale = 0;
    if (p == Packing::Int8) std::memcpy(&scale, packed, 4);
    for (uint64_t i = 0; i < elements; ++i) {
      ++values;
      bool ok = false;
      switch (p) {
        case Packing::BF16: ok = cpu::bf16_value(cpu::bf16_bits(y[i])) == y[i]; break;
        case Packing::F16: ok = cpu::f16_value(cpu::f16_bits(y[i])) == y[i]; break;
        case Packing::Int8: {  // some code k in [-127, 127] with y = k · scale exactly
          const float k = scale > 0 ? std::nearbyint(y[i] / scale) : 0;
          ok = std::fabs(k) <= 127 && static_cast<float>(k) * scale == y[i];
          break;
        }
        case Packing::None: break;
      }
      not_representable += !ok;
    }
  }
};

bool bitwise_equal(const ExecResult& a, const ExecResult& b) {
  return std::memcmp(&a.loss, &b.loss, 4) == 0 && a.param_grads == b.param_grads && a.grad_hash == b.grad_hash;
}

}  // namespace

// chain:7:64 under sqrt+compress:bf16: test_compress.cpp derives the peak,
// 6 T + 32 = 416 bytes; the executor's count is that, to the byte, and x and
// a3 are decompressed once each (every value a bf16).
TEST(CompressExec, Chain7TrackedPeakAndRealConversions) {
  const Model m = make_preset("chain:7:64");
  for (const char* type : {"bf16", "f16", "int8"}) {
    SCOPED_TRACE(type);
    const Schedule s = schedule_of(m, std::string("sqrt+compress:") + type);
    const uint64_t c = std::string(type) == "int8" ? 20 : 32;
    ASSERT_EQ(simulate(m, s).peak_bytes, 6u * 64 + c);
    CpuBackend cpu;
    ConversionProbe probe(cpu);
    const ExecResult r = execute(m, s, probe, quick());
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_TRUE(r.compressed);
    EXPECT_EQ(r.tracked_peak_bytes, 6u * 64 + c);
    EXPECT_EQ(probe.decompressed, 2 * (1 + quick().repeat));  // x and a3, every run
    EXPECT_EQ(probe.values, 2 * 16 * (1 + quick().repeat));
    EXPECT_EQ(probe.not_representable, 0);
    // Measured: x and a3 compressed and decompressed once a run; their time
    // is a sum of instruction times (no value asserted: timing).
    EXPECT_EQ(r.conversions, 4);
    EXPECT_GE(r.convert_ms, 0.0);
    double sum = 0;
    for (std::size_t i = 0; i < s.code.size(); ++i)
      if (is_compress(s.code[i].kind) || s.code[i].kind == InstrKind::Decompress) sum += r.instr_ms[i];
    EXPECT_DOUBLE_EQ(r.convert_ms, sum);
  }
}

// Offloaded and compressed: the host pool holds the compressed copies only.
TEST(CompressExec, OffloadedCompressedCopiesInTheHostPool) {
  const Model m = make_preset("chain:7:64");
  const Schedule s = schedule_of(m, "offload+sqrt+compress:f16");
  const Simulation sim = simulate(m, s);
  ASSERT_EQ(sim.peak_host_bytes, 2u * 32);
  CpuBackend cpu;
  const ExecResult r = execute(m, s, cpu, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.tracked_peak_bytes, sim.peak_bytes);
  EXPECT_EQ(r.host_tracked_peak_bytes, 2u * 32);
  EXPECT_EQ(r.host_memory.tensors, 2u * 32);
  // The same conversions as without the offload: a copy changes nothing.
  const ExecResult plain = execute(m, schedule_of(m, "sqrt+compress:f16"), cpu, quick());
  ASSERT_TRUE(plain.ok()) << plain.message;
  EXPECT_TRUE(bitwise_equal(r, plain));
}

// Two runs on fresh backends give the same bits; the error against store-all
// is within the stated bound and not zero (the checkpoints really were
// rounded). The loss is store-all's exactly: it is computed by the forward
// pass, which reads no decompressed tensor; only the backward's recomputes do.
// Bounds: on smooth models (chain: Dense + tanh; the transformer: GELU,
// LayerNorm) bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3 a
// value), f16 11 (2^-12), int8 a step of max|x| / 127 a tensor: bf16 < 1e-2,
// f16 < 1e-3, int8 < 2e-2. A ReLU MLP is rougher: a rounded input can flip a
// pre-activation's sign near 0, which changes a whole mask entry: bf16 < 5e-2,
// int8 < 2e-1 there.
TEST(CompressExec, ReproducibleAndWithinTheStatedError) {
  struct Case {
    const char* model;
    const char* spec;
    double bound;
  };
  for (const Case& c : {Case{"chain:12:256", "sqrt+compress:bf16", 1e-2}, Case{"chain:12:256", "sqrt+compress:f16", 1e-3},
                        Case{"chain:12:256", "sqrt+compress:int8", 2e-2},
                        Case{"chain:12:256", "recompute-all+compress:int8", 2e-2},
                        Case{"transformer:2:32:8:2", "sqrt+compress:bf16", 1e-2},
                        Case{"transformer:2:32:8:2", "sqrt+compress:f16", 1e-3},
                        Case{"transformer:2:32:8:2", "sqrt+compress:int8", 2e-2},
                        Case{"mlp:4:32:8", "sqrt+compress:bf16", 5e-2}, Case{"mlp:4:32:8", "sqrt+compress:int8", 2e-1},
                        Case{"mlp:4:32:8", "offload+sqrt+compress:bf16", 5e-2}}) {
    SCOPED_TRACE(std::string(c.model) + " " + c.spec);
    const Model m = make_preset(c.model);
    CpuBackend one, two;
    const ExecResult ref = execute(m, schedule_of(m, "store-all"), one, quick());
    const ExecResult a = execute(m, schedule_of(m, c.spec), one, quick());
    const ExecResult b = execute(m, schedule_of(m, c.spec), two, quick());
    ASSERT_TRUE(ref.ok() && a.ok() && b.ok());
    EXPECT_TRUE(bitwise_equal(a, b)) << "not reproducible run to run";
    EXPECT_FALSE(same_loss_and_grads(a, ref));
    const ResultError e = relative_error(a, ref);
    EXPECT_GT(e.grad, 0.0);
    EXPECT_LT(e.grad, c.bound);
    EXPECT_EQ(e.loss, 0.0);
    EXPECT_EQ(std::memcmp(&a.loss, &ref.loss, 4), 0);
  }
}

// An uncompressed strategy stays bitwise equal: error exactly 0.
TEST(CompressExec, UncompressedStrategiesStayBitwiseEqual) {
  const Model m = make_preset("mlp:4:32:8");
  CpuBackend cpu;
  const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
  const ExecResult a = execute(m, schedule_of(m, "sqrt"), cpu, quick());
  ASSERT_TRUE(ref.ok() && a.ok());
  EXPECT_FALSE(a.compressed);
  EXPECT_EQ(a.conversions, 0);
  EXPECT_EQ(a.convert_ms, 0.0);
  EXPECT_TRUE(same_loss_and_grads(a, ref));
  EXPECT_EQ(relative_error(a, ref).grad, 0.0);
}

// relative_error's arithmetic on results made by hand: the loss's |Δ| / |l|,
// the largest per-tensor ||Δg||₂ / ||g||₂, and an uncompressed strategy's 0.
TEST(CompressExec, RelativeErrorByHand) {
  ExecResult ref, a;
  ref.loss = 2.0f;
  a.loss = 2.5f;
  ref.param_grads = {{3.0f, 4.0f}, {1.0f, 0.0f}, {0.0f}};
  a.param_grads = {{3.0f, 4.5f}, {1.0f, 0.0f}, {0.0f}};
  const ResultError e = relative_error(a, ref);
  EXPECT_DOUBLE_EQ(e.loss, 0.25);
  EXPECT_DOUBLE_EQ(e.grad, 0.5 / 5.0);  // ||(0, 0.5)|| / ||(3, 4)||
  EXPECT_EQ(e.worst, 0u);
  a.param_grads[2] = {0.25f};  // a zero reference: the absolute error, 0.25 > 0.1
  EXPECT_DOUBLE_EQ(relative_error(a, ref).grad, 0.25);
  EXPECT_EQ(relative_error(a, ref).worst, 2u);
  EXPECT_DOUBLE_EQ(relative_error(ref, ref).grad, 0.0);
  ExecResult failed;
  failed.status = ExecStatus::OutOfMemory;
  EXPECT_THROW((void)relative_error(failed, ref), std::logic_error);
}

// A backend without the conversions refuses a compressing schedule up front.
TEST(CompressExec, BackendWithoutConversionsRefuses) {
  class NoConversions final : public WrappedBackend, public ForwardingHostTier {
   public:
    explicit NoConversions(Backend& inner) : WrappedBackend(inner), ForwardingHostTier(inner.host()) {}
    HostTier& host() override { return *this; }
    bool can_compress() const override { return false; }
  };
  const Model m = make_preset("chain:7:64");
  CpuBackend cpu;
  NoConversions none(cpu);
  try {
    (void)execute(m, schedule_of(m, "sqrt+compress:bf16"), none, quick());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "the cpu backend cannot convert tensors: strategy 'sqrt+compress:bf16' compresses checkpoints");
  }
}
