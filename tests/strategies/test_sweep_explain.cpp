// The sweep's front and the peak explanation.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/analysis/explain.h"
#include "core/analysis/sweep.h"
#include "core/strategies/registry.h"
#include "tests/strategies/strategy_test_util.h"

using namespace remat;

namespace {

void check_monotone(const Model& m, const SweepResult& r) {
  ASSERT_FALSE(r.budgets.empty());
  for (std::size_t i = 0; i < r.budgets.size(); ++i) {
    const SweepPoint& p = r.budgets[i];
    if (!p.feasible) continue;
    EXPECT_LE(p.peak, p.budget);
    // The spec recreates a schedule with that peak and overhead. A MILP
    // point's spec (optimal:B:S) searches again under a time limit, so on a
    // busier machine it may stop at another schedule: one within the budget.
    const Simulation s = simulate(m, make_strategy(p.spec.str())->schedule(m));
    if (p.spec.str().starts_with("optimal:")) {
      EXPECT_LE(s.peak_bytes, p.budget) << p.spec.str();
    } else {
      EXPECT_EQ(s.peak_bytes, p.peak) << p.spec.str();
      EXPECT_DOUBLE_EQ(s.recompute_flops, p.recompute_flops) << p.spec.str();
    }
    if (i > 0 && r.budgets[i - 1].feasible) EXPECT_LE(p.overhead, r.budgets[i - 1].overhead) << m.name << " at " << p.budget;
  }
}

}  // namespace

TEST(Sweep, OverheadNeverGrowsWithTheBudget) {
  for (const char* spec : {"chain:40", "mlp:6", "transformer:1:16:4:2"}) {
    const Model m = make_preset(spec);
    SweepOptions o;
    o.optimal_seconds = 0.2;
    o.named = named_points(m);
    const SweepResult r = sweep(m, auto_budgets(o.named), o);
    EXPECT_GE(r.budgets.size(), 12u) << spec;
    check_monotone(m, r);
    // Each named strategy's peak is a budget: the front, a step that holds
    // until the next budget, is never drawn above a strategy in between.
    for (const auto& n : r.named) {
      const SweepPoint* at = nullptr;
      for (const auto& p : r.budgets)
        if (p.budget <= n.peak) at = &p;
      ASSERT_NE(at, nullptr) << spec << " " << n.spec.str();
      EXPECT_EQ(at->budget, n.peak) << spec << " " << n.spec.str();
      EXPECT_LE(at->recompute_flops, n.recompute_flops) << spec << " " << n.spec.str();
    }
    // The ends: recompute-all's peak is feasible, store-all's costs nothing.
    EXPECT_TRUE(r.budgets.front().feasible);
    EXPECT_EQ(r.budgets.back().overhead, 0.0);
  }
}

TEST(Sweep, NoNamedStrategyBeatsTheFront) {
  const Model m = test::unequal_chain({8, 64, 4, 32, 128, 16, 8, 256, 12, 40, 9, 77});
  std::vector<uint64_t> budgets;
  for (uint64_t b = 200; b <= 3000; b += 100) budgets.push_back(b);
  const SweepResult r = sweep(m, budgets);
  check_monotone(m, r);
  for (const auto& p : r.budgets)
    for (const auto& n : r.named)
      if (n.peak <= p.budget) {
        ASSERT_TRUE(p.feasible);
        EXPECT_LE(p.recompute_flops, n.recompute_flops) << n.spec.str() << " at " << p.budget;
      }
  const auto j = sweep_json(m, r);
  EXPECT_EQ(j["budgets"].size(), budgets.size());
}

TEST(Sweep, BudgetListsParse) {
  const Model m = make_preset("chain:8");
  const auto named = named_points(m);
  EXPECT_EQ(parse_budgets(named, "1K,2K"), (std::vector<uint64_t>{1024, 2048}));
  EXPECT_EQ(parse_budgets(named, "auto"), auto_budgets(named));
  EXPECT_THROW(parse_budgets(named, "1K,lots"), InputError);
  // Shares of store-all's peak, given by the caller (the model's).
  EXPECT_EQ(parse_budgets(named, "50%,1K,100%", 4000), (std::vector<uint64_t>{2000, 1024, 4000}));
  EXPECT_THROW(parse_budgets(named, "50%,x%", 4000), InputError);
}

// The lesson: checkpointing only the last layer of mlp:8 saves nothing. The
// checkpoint splits the backward into the last layer and everything before it,
// so the earlier segment is recomputed whole and held at once: the same tensors
// store-all holds while they wait for their backward.
// chain:7:64 (x, a1..a6, loss; every tensor and gradient T = 64 bytes, 16
// floats) with compressed checkpoints, derived in tests/strategies/test_compress.cpp:
// sqrt keeps x and a3 through the backward, both compressed, and peaks at
// bwd a6 with 6 whole tensors and C(x): 6 T + |C(x)|; the copies made are
// C(x) and C(a3). bf16 keeps 2 bytes a float (|C| = 32), int8 one byte a
// float and the f32 scale (|C| = 20). store-all compresses nothing (the
// backward reads every kept tensor directly): its peak is at bwd a6 too, x
// and a1..a6 with G(a6) and G(a5), 9 T.
TEST(Sweep, CompressedCheckpointsCountAtTheirStoredSize) {
  constexpr uint64_t T = 64;
  const Model m = make_preset("chain:7:64");
  for (const auto& [packing, name, c] : {std::tuple{Packing::BF16, "bf16", uint64_t{32}}, {Packing::Int8, "int8", uint64_t{20}}}) {
    SCOPED_TRACE(name);
    const std::string suffix = std::string("+compress:") + name;
    SweepOptions o;
    o.compress = packing;
    const SweepResult r = sweep(m, {6 * T + c, 9 * T}, o);
    EXPECT_EQ(r.compress, packing);
    auto named = [&](const std::string& spec) -> const NamedPoint* {
      for (const NamedPoint& n : r.named)
        if (n.spec.str() == spec) return &n;
      return nullptr;
    };
    const NamedPoint* sqrt = named("sqrt" + suffix);
    ASSERT_NE(sqrt, nullptr);
    EXPECT_EQ(sqrt->peak, 6 * T + c);
    EXPECT_EQ(sqrt->compressed_bytes, 2 * c);
    const NamedPoint* all = named("store-all" + suffix);
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(all->peak, 9 * T);
    EXPECT_EQ(all->compressed_bytes, 0u);
    EXPECT_EQ(named("sqrt"), nullptr);  // every named point is compressed
    ASSERT_EQ(r.budgets.size(), 2u);
    // At sqrt's compressed peak, sqrt's recompute at most (it fits there);
    // at store-all's peak none (store-all fits, the first candidate taken).
    const SweepPoint& low = r.budgets[0];
    ASSERT_TRUE(low.feasible);
    EXPECT_LE(low.peak, 6 * T + c);
    EXPECT_LE(low.recompute_flops, sqrt->recompute_flops);
    const SweepPoint& high = r.budgets[1];
    ASSERT_TRUE(high.feasible);
    EXPECT_EQ(high.spec.str(), "store-all" + suffix);
    EXPECT_EQ(high.peak, 9 * T);
    EXPECT_EQ(high.recompute_flops, 0);
    // Each point's spec recreates its schedule, compressed, with that peak and stored size.
    for (const SweepPoint& p : r.budgets) {
      EXPECT_TRUE(p.spec.str().ends_with(suffix)) << p.spec.str();
      const Simulation s = simulate(m, make_strategy(p.spec.str())->schedule(m));
      EXPECT_EQ(s.peak_bytes, p.peak) << p.spec.str();
      EXPECT_EQ(s.compressed_bytes, p.compressed_bytes) << p.spec.str();
    }
    const auto j = sweep_json(m, r);
    EXPECT_EQ(j["compress"], name);
    EXPECT_EQ(j["budgets"][1]["compressed_bytes"], 0u);
  }
  // Without compression sqrt keeps x whole: 7 T.
  const SweepResult plain = sweep(m, {7 * T});
  EXPECT_EQ(plain.compress, Packing::None);
  EXPECT_TRUE(sweep_json(m, plain)["compress"].is_null());
  for (const NamedPoint& n : plain.named) {
    EXPECT_EQ(n.spec.str().find("+compress:"), std::string::npos) << n.spec.str();
    if (n.spec.str() == "sqrt") EXPECT_EQ(n.peak, 7 * T);
  }
}

TEST(Explain, LastLayerCheckpointSavesOnlyItsOwnOutput) {
  const Model m = make_preset("mlp:8");
  const int last = m.loss() - 1;  // l8.relu
  const auto store = explain_peak(m, make_strategy("store-all")->schedule(m));
  const auto manual = explain_peak(m, make_strategy("manual:" + std::to_string(last))->schedule(m));
  // Recomputing every layer below holds what store-all holds at its peak
  // less the last ReLU's output: that ReLU's backward reads only its kept
  // output, so it runs before the recomputation (as PyTorch's checkpointing
  // recomputes only when backward first unpacks a recomputed tensor) and the
  // output is gone by then (docs/memory-model.md, "When a phase recomputes").
  EXPECT_EQ(manual.peak_bytes, store.peak_bytes - m.op(last).bytes);
  EXPECT_EQ(store.peak_bytes, simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes);

  // Group bytes add up to the peak.
  for (const auto* e : {&store, &manual}) {
    uint64_t sum = 0;
    for (const auto& g : e->groups) sum += g.bytes;
    EXPECT_EQ(sum, e->peak_bytes);
  }
  // Every ReLU output of layers 1..7 (what Linear's backward reads) is resident
  // at both peaks: waiting for the backward under store-all, recomputed under manual.
  const PeakGroup* waiting = store.group(HeldFor::AwaitsBackward);
  const PeakGroup* recomputed = manual.group(HeldFor::Recomputed);
  ASSERT_TRUE(waiting && recomputed);
  for (int layer = 1; layer <= 7; ++layer) {
    const int relu = 2 * layer;
    EXPECT_NE(std::find(waiting->ops.begin(), waiting->ops.end(), relu), waiting->ops.end()) << relu;
    EXPECT_NE(std::find(recomputed->ops.begin(), recomputed->ops.end(), relu), recomputed->ops.end()) << relu;
  }
  EXPECT_GE(recomputed->bytes, 7 * m.op(2).bytes);
  // Whereas sqrt's peak is lower, and its explanation has real checkpoints.
  const auto sq = explain_peak(m, make_strategy("sqrt")->schedule(m));
  EXPECT_LT(sq.peak_bytes, store.peak_bytes);
  EXPECT_NE(explanation_text(m, manual).find("being recomputed"), std::string::npos);
}

TEST(Explain, GroupsSumToThePeakForEveryStrategy) {
  for (const char* spec : {"chain:20", "transformer:2"}) {
    const Model m = make_preset(spec);
    for (const char* s : {"store-all", "recompute-all", "sqrt", "auto", "selective", "offload:3", "offload+recompute-all"}) {
      const auto e = explain_peak(m, make_strategy(s)->schedule(m));
      uint64_t sum = 0;
      for (const auto& g : e.groups) sum += g.bytes;
      EXPECT_EQ(sum, e.peak_bytes) << spec << " " << s;
      EXPECT_EQ(explanation_json(m, e)["peak_bytes"], e.peak_bytes);
    }
  }
}

// chain:10 under offload:3 (tests/strategies/test_offload.cpp derives it): the
// device peak, 7 bytes at bwd a9, holds a3, a6, a9, a7, a8 and two gradients;
// the input x waits on the host, outside the peak, and the explanation says so.
TEST(Explain, OffloadedTensorsAreListedOnTheHostOutsideThePeak) {
  const Model m = make_preset("chain:10");
  const Schedule s = make_strategy("offload:3")->schedule(m);
  const auto e = explain_peak(m, s);
  EXPECT_EQ(e.peak_bytes, 7u);
  EXPECT_EQ(e.host_ops, (std::vector<int>{0}));
  EXPECT_EQ(e.host_bytes, 1u);
  EXPECT_EQ(e.host_bytes, simulate(m, s).host_timeline.at(e.peak_index));
  const std::string text = explanation_text(m, e);
  EXPECT_NE(text.find("on the host (not in the device peak): 1 bytes, 1 tensor [" + m.op(0).name + "]"), std::string::npos)
      << text;
  EXPECT_EQ(explanation_json(m, e)["host"]["ops"], nlohmann::json::array({0}));
  // Without offload nothing is on the host, and the text has no such line.
  const auto plain = explain_peak(m, make_strategy("every-k:3")->schedule(m));
  EXPECT_TRUE(plain.host_ops.empty());
  EXPECT_EQ(explanation_text(m, plain).find("on the host"), std::string::npos);
}

// Compressed checkpoints count at their stored size: on chain:7:64 under
// sqrt+compress:bf16 (test_compress.cpp derives it) the peak, 416 bytes at
// bwd a6, holds C(x) (32 bytes) as a checkpoint beside six whole tensors; the
// groups still sum to the peak, and offloaded compressed copies are listed on
// the host at their stored size.
TEST(Explain, CompressedCheckpointsCountAtTheirStoredSize) {
  const Model m = make_preset("chain:7:64");
  for (const char* s : {"sqrt+compress:bf16", "sqrt+compress:int8", "offload+sqrt+compress:f16",
                        "recompute-all+compress:int8"}) {
    SCOPED_TRACE(s);
    const Schedule sched = make_strategy(s)->schedule(m);
    const auto e = explain_peak(m, sched);
    uint64_t sum = 0;
    for (const auto& g : e.groups) sum += g.bytes;
    EXPECT_EQ(sum, e.peak_bytes);
    const Simulation sim = simulate(m, sched);
    EXPECT_EQ(e.host_bytes, sim.host_timeline.empty() ? 0u : sim.host_timeline.at(e.peak_index));
  }
  const auto e = explain_peak(m, make_strategy("sqrt+compress:bf16")->schedule(m));
  EXPECT_EQ(e.peak_bytes, 6u * 64 + 32);
  const PeakGroup* ck = e.group(HeldFor::Checkpoint);
  ASSERT_NE(ck, nullptr);
  EXPECT_NE(std::find(ck->ops.begin(), ck->ops.end(), 0), ck->ops.end());
}
