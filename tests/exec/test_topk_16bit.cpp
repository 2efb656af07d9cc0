// A TopK of a 16-bit tensor (a mixture of experts' router under autocast:
// Linear, a bf16 softmax, topk, the picked weights gathered): the TopK's
// indices pass no gradient on, and its mixed-precision backward must leave
// G(softmax) alone, as the f32 backward does. It used to store unwritten f32
// scratch there, so the router's gradient took stale values that depended on
// the strategy (python_zoo_autocast's moe under torch 2.6: recompute-all off
// store-all by 0.02 in the router's weight).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/io/model_source.h"
#include "tests/exec/exec_test_util.h"

namespace remat {
namespace {

using testing::quick;
using testing::schedule_of;

// Input -> Linear (f32) -> Softmax (dtype d) -> TopK -> Gather (d) -> cast f32 -> MSE.
Model router(const std::string& d) {
  const std::string json = R"({"format": "remat-model", "version": 1, "name": "router_)" + d + R"(", "ops": [
  {"id": 0, "kind": "Input", "shape": [12, 8], "dtype": "f32"},
  {"id": 1, "kind": "Linear", "bias": false, "inputs": [0], "shape": [12, 4], "dtype": "f32", "saved": [0]},
  {"id": 2, "kind": "Softmax", "axis": -1, "inputs": [1], "shape": [12, 4], "dtype": ")" + d + R"(", "saved": [2]},
  {"id": 3, "kind": "TopK", "k": 2, "axis": 1, "inputs": [2], "shape": [12, 2], "dtype": "i64", "saved": []},
  {"id": 4, "kind": "Gather", "axis": 1, "inputs": [2, 3], "shape": [12, 2], "dtype": ")" + d + R"(", "saved": [3]},
  {"id": 5, "kind": "Pointwise", "fn": "cast", "inputs": [4], "shape": [12, 2], "dtype": "f32", "saved": []},
  {"id": 6, "kind": "MSELoss", "inputs": [5], "saved": [5]}]})";
  const std::string path = ::testing::TempDir() + "router_" + d + ".json";
  std::ofstream(path) << json;
  Model m = load_json_model(path);
  std::remove(path.c_str());
  return m;
}

TEST(TopK16Bit, EveryStrategyBitwiseAndTheRouterGradientNearF32) {
  CpuBackend cpu;
  const Model f32 = router("f32");
  const ExecResult full = execute(f32, schedule_of(f32, "store-all"), cpu, quick());
  ASSERT_TRUE(full.ok()) << full.message;
  for (const char* d : {"bf16", "f16"}) {
    const Model m = router(d);
    const ExecResult ref = execute(m, schedule_of(m, "store-all"), cpu, quick());
    ASSERT_TRUE(ref.ok()) << d << ": " << ref.message;
    for (const char* s : {"recompute-all", "sqrt"}) {
      const Schedule sched = schedule_of(m, s);
      const ExecResult r = execute(m, sched, cpu, quick());
      ASSERT_TRUE(r.ok()) << d << " " << s << ": " << r.message;
      EXPECT_EQ(r.tracked_peak_bytes, simulate(m, sched).peak_bytes) << d << " " << s;
      EXPECT_EQ(std::memcmp(&r.loss, &ref.loss, 4), 0) << d << " " << s;
      ASSERT_EQ(r.param_grads.size(), 1u);
      EXPECT_EQ(std::memcmp(r.param_grads[0].data(), ref.param_grads[0].data(), 4 * r.param_grads[0].size()), 0)
          << d << " " << s << ": the router's weight gradient";
    }
    // The same step in f32 picks the same experts (the softmax's 4 values
    // per row are far apart at this seed, or the test says so), so the 16-bit
    // gradient differs from f32's by the roundings of the softmax, the
    // gathered weights, their gradient and the softmax's input gradient: 4 of
    // at most u each, relative to the largest element.
    const double u = std::string(d) == "bf16" ? 0x1p-8 : 0x1p-11;
    const std::vector<float>& g = ref.param_grads[0];
    const std::vector<float>& g32 = full.param_grads[0];
    double top = 0, worst = 0;
    for (float x : g32) top = std::max(top, std::fabs(static_cast<double>(x)));
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(g[i]) - g32[i]));
    EXPECT_GT(top, 0.0);
    EXPECT_LE(worst, 4 * u * top) << d << ": the router's weight gradient, f32's largest element " << top;
  }
}

}  // namespace
}  // namespace remat
