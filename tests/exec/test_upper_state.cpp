// The CPU kernels (built with -march=native) hand the processor back with the
// upper halves of its vector registers clean. If a kernel leaves them dirty,
// every legacy-SSE instruction after it (glibc's exp wrapper, the rest of
// remat, built for baseline x86-64) pays a state transition: GCC 12 with
// -fipa-ra left softmax_ce_fwd_keep_logp so, and a bf16 GPT's cross-entropy
// ran 20 to 40 times slower (core/kernels/CMakeLists.txt). This checks the
// state itself, not a time: XGETBV with ECX = 1 reads which register state
// components are in use (XINUSE), and after a vzeroupper the upper halves of
// YMM0-15 (component 2) and of ZMM0-15 (component 6) are not. ZMM16-31
// (component 7) is left out: no legacy-SSE instruction depends on it, and
// glibc's EVEX string functions use it for that reason.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/exec/forwarding_backend.h"
#include "core/io/model_source.h"
#include "core/model/op_layout.h"
#include "tests/exec/exec_test_util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// XINUSE's components 2 and 6, or nullopt where the processor cannot say.
std::optional<uint64_t> dirty_upper_state() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  // XGETBV faults unless the OS enabled XSAVE (CPUID.1:ECX.OSXSAVE); ECX = 1
  // needs CPUID.(0DH, 1):EAX[2].
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return std::nullopt;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2))) return std::nullopt;
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return ((static_cast<uint64_t>(hi) << 32) | lo) & ((1u << 2) | (1u << 6));
#else
  return std::nullopt;
#endif
}

// Reads the state after each kernel call and keeps the calls that left it dirty.
class UpperStateProbe final : public WrappedBackend, public ForwardingCompute {
 public:
  explicit UpperStateProbe(Backend& inner) : WrappedBackend(inner), ForwardingCompute(inner.compute()) {}
  Compute& compute() override { return *this; }
  void forward(const Model& m, int v, const TensorTable& t) override {
    ForwardingCompute::forward(m, v, t);
    check(m, v, "forward");
  }
  void backward(const Model& m, int v, const TensorTable& t, std::span<const uint8_t> acc) override {
    ForwardingCompute::backward(m, v, t, acc);
    check(m, v, "backward");
  }
  std::vector<std::string> dirty;
  int calls = 0;

 private:
  void check(const Model& m, int v, const char* what) {
    ++calls;
    if (const auto s = dirty_upper_state(); s && *s)
      dirty.push_back(std::string(what) + " of " + op_label(m, v) + " (" + std::string(kind_name(m.op(v).kind)) + ")");
  }
};

struct Case {
  const char* name;
  std::string model;   // a preset or a file of tests/exec/models
  const char* dtype;   // a file's ops made bf16 or f16 (testing::model_in), or "" as it is
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Model model_of(const Case& c) {
  return *c.dtype ? testing::model_in(c.model, c.dtype) : load_model(c.model);
}

class UpperState : public ::testing::TestWithParam<Case> {};

// GCC places vzeroupper only when it optimises: an -O0 build (the ASan
// suites') leaves the upper halves dirty everywhere, and is not what anyone
// times. This file is built at the kernels' optimisation level.
#if defined(__OPTIMIZE__)
constexpr bool kOptimised = true;
#else
constexpr bool kOptimised = false;
#endif

TEST_P(UpperState, EveryKernelCallLeavesTheUpperHalvesClean) {
  if (!kOptimised) {
    RecordProperty("upper_state", "an unoptimised build: GCC places no vzeroupper; nothing checked");
    return;
  }
  if (!dirty_upper_state()) {
    // Not an x86-64 with XGETBV's ECX = 1: nothing to read. (Debian's CI
    // machines and this project's have it.)
    RecordProperty("upper_state", "this processor does not report XINUSE; nothing checked");
    return;
  }
  const Model m = model_of(GetParam());
  CpuBackend cpu;
  UpperStateProbe probe(cpu);
  const ExecResult r = execute(m, schedule_of(m, "sqrt"), probe, quick());
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_GT(probe.calls, m.size());  // every op forward and backward at least once
  std::string list;
  for (const std::string& d : probe.dirty) list += "\n  " + d;
  EXPECT_TRUE(probe.dirty.empty()) << probe.dirty.size() << " kernel call(s) left the upper halves dirty:" << list;
}

// bf16 presets (their f32 kernels behind the widening call), the captured
// Llama, f32 presets, and small models of every loss and the pointwise family
// in f32 and bf16 (the cross-entropy keeping its log-probabilities among them).
const std::string kModels = REMAT_EXEC_TEST_MODELS "/";
INSTANTIATE_TEST_SUITE_P(
    Models, UpperState,
    ::testing::Values(Case{"gpt_bf16", "gpt:2:16:2:6:2:bf16:20", ""}, Case{"resnet_bf16", "resnet:10:4:32:2:5:bf16", ""},
                      Case{"llama_bf16", kModels + "llama_bf16_small.json", ""},
                      Case{"gpt_f32", "gpt:2:16:2:6:2:f32:20", ""}, Case{"resnet_f32", "resnet:10:4:32:2:5", ""},
                      Case{"ce_logp_f32", kModels + "ce_keeps_logp.json", ""},
                      Case{"ce_smoothed_logp_f32", kModels + "ce_smoothed_logp.json", ""},
                      Case{"bce_f32", kModels + "bce_small.json", ""}, Case{"pad_f32", kModels + "pad_small.json", ""},
                      Case{"tail_f32", kModels + "tail_small.json", ""},
                      Case{"pointwise_f32", kModels + "pointwise_small.json", ""},
                      Case{"pointwise_bf16", kModels + "pointwise_small.json", "bf16"},
                      Case{"attention_bf16", kModels + "attention_small.json", "bf16"},
                      Case{"tail_f16", kModels + "tail_small.json", "f16"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace remat
