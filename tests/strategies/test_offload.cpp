// Strategy offload[:K] / offload+SPEC: where the transfers go, the two tiers'
// peaks derived by hand on a unit chain, and validity on every preset family.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/analysis/comparison.h"
#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/offload.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

// The instruction right before / after the first one equal to `ins`.
std::string neighbour(const Model& m, const Schedule& s, Instr ins, int delta) {
  const auto it = std::find(s.code.begin(), s.code.end(), ins);
  if (it == s.code.end()) return "missing " + to_string(ins, m);
  const auto i = static_cast<std::ptrdiff_t>(it - s.code.begin()) + delta;
  if (i < 0 || i >= static_cast<std::ptrdiff_t>(s.code.size())) return "out of range";
  return to_string(s.code[static_cast<std::size_t>(i)], m);
}

int count(const Schedule& s, InstrKind k) {
  return static_cast<int>(std::count_if(s.code.begin(), s.code.end(), [&](Instr i) { return i.kind == k; }));
}

}  // namespace

// chain:10 (x, a1..a9, loss; one byte each; Dense saves its input and output)
// with checkpoints every 3: a3, a6, a9. The backward reads a9 first (bwd loss),
// then recomputes a7, a8 from a6, a4, a5 from a3, a1, a2 from x.
//
// every-k:3 peaks at bwd a9: x, a3, a6 (kept), a9, G(a9), a7, a8
// (recomputed), + G(a8) = 8.
//
// offload:3 moves x, a3, a6 (a9 is read at once by bwd loss): x after fwd a1,
// a3 after fwd a4, a6 after fwd a7; a6 comes back when the backward starts,
// a3 at the recompute of a7 (the first read of a6), x at the recompute of a4.
// At bwd a9 the device holds a3, a6, a9, G(a9), a7, a8 + G(a8) = 7 (x is on
// the host); at bwd a6: x, a3, a6, G(a6), a4, a5 + G(a5) = 7. The host holds
// all three at the end of the forward pass: 3.
TEST(Offload, Chain10EveryThirdByHand) {
  const Model m = make_preset("chain:10");
  const Simulation plain = simulate(m, make_strategy("every-k:3")->schedule(m));
  EXPECT_EQ(plain.peak_bytes, 8u);
  EXPECT_EQ(plain.peak_host_bytes, 0u);

  const Schedule s = make_strategy("offload:3")->schedule(m);
  EXPECT_EQ(s.strategy, "offload:3");
  const Simulation o = simulate(m, s);
  EXPECT_EQ(o.peak_bytes, 7u);
  EXPECT_EQ(o.peak_host_bytes, 3u);
  EXPECT_EQ(o.transfers, 6);
  EXPECT_EQ(o.transfer_bytes, 6u);
  // Offload is a move: the compute is every-k:3's, to the step.
  EXPECT_EQ(o.forward_steps, plain.forward_steps);
  EXPECT_EQ(o.recompute_steps, plain.recompute_steps);
  EXPECT_EQ(s.code.size(), make_strategy("every-k:3")->schedule(m).code.size() + 6);

  EXPECT_EQ(neighbour(m, s, {InstrKind::Offload, 0}, -1), "fwd a1");
  EXPECT_EQ(neighbour(m, s, {InstrKind::Offload, 3}, -1), "fwd a4");
  EXPECT_EQ(neighbour(m, s, {InstrKind::Offload, 6}, -1), "fwd a7");
  EXPECT_EQ(neighbour(m, s, {InstrKind::Fetch, 6}, 1), "bwd loss");
  EXPECT_EQ(neighbour(m, s, {InstrKind::Fetch, 3}, 1), "fwd a7");  // the recompute: after the first pass's
  EXPECT_EQ(neighbour(m, s, {InstrKind::Fetch, 0}, 1), "fwd a4");
  // The fetches follow the backward: a6, then a3, then x.
  const auto at = [&](Instr i) { return std::find(s.code.begin(), s.code.end(), i) - s.code.begin(); };
  EXPECT_LT(at({InstrKind::Fetch, 6}), at({InstrKind::Fetch, 3}));
  EXPECT_LT(at({InstrKind::Fetch, 3}), at({InstrKind::Fetch, 0}));
  // The host timeline: 1, 2, 3 tensors away during the forward pass.
  EXPECT_EQ(o.host_timeline[static_cast<std::size_t>(at({InstrKind::Offload, 0}))], 1u);
  EXPECT_EQ(o.host_timeline[static_cast<std::size_t>(at({InstrKind::Offload, 6}))], 3u);
  EXPECT_EQ(o.host_timeline.back(), 0u);
}

TEST(Offload, DefaultIsSqrtsCheckpoints) {
  const Model m = make_preset("chain:16");  // ceil(sqrt(16)) = 4: a4, a8, a12
  const Schedule a = make_strategy("offload")->schedule(m);
  const Schedule b = make_strategy("offload:4")->schedule(m);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.strategy, "offload");
  // x, a4, a8 move; a12 is read at once by the last segment's backward.
  EXPECT_EQ(count(a, InstrKind::Offload), 3);
  EXPECT_EQ(count(a, InstrKind::Fetch), 3);
  EXPECT_EQ(make_strategy("offload+sqrt")->schedule(m).code, a.code);
}

TEST(Offload, NothingToMoveWithoutRecompute) {
  // store-all never recomputes: everything it keeps is read as soon as the
  // backward reaches it, so nothing waits long enough to go away.
  const Model m = make_preset("chain:8");
  const Schedule s = make_strategy("offload+store-all")->schedule(m);
  EXPECT_EQ(s.code, make_strategy("store-all")->schedule(m).code);
  EXPECT_EQ(s.strategy, "offload+store-all");
}

TEST(Offload, ValidOnEveryPresetFamilyAndInnerStrategy) {
  for (const char* spec : {"chain:30", "chain:7:64", "mlp:6", "mlp:3:32:8", "transformer:2", "transformer:2:32:8:2",
                           "gpt:2", "resnet:10"}) {
    const Model m = make_preset(spec);
    for (const char* st : {"offload", "offload:2", "offload+sqrt", "offload+auto", "offload+selective", "offload+recompute-all",
                           "offload+revolve:3"}) {
      SCOPED_TRACE(std::string(spec) + " " + st);
      std::unique_ptr<Strategy> strategy = make_strategy(st);
      Schedule s;
      try {
        s = strategy->schedule(m);
      } catch (const InputError& e) {  // revolve: chains only
        EXPECT_NE(std::string(st).find("revolve"), std::string::npos) << e.what();
        continue;
      }
      const Simulation sim = simulate(m, s);
      EXPECT_EQ(sim.transfers % 2, 0);
      const ScheduleSize size = strategy->size(m, UINT64_MAX);
      EXPECT_EQ(size.bound, ScheduleSize::Bound::AtMost);
      EXPECT_LE(s.code.size(), size.instructions);
    }
  }
}

TEST(Offload, NeverRaisesTheDevicePeak) {
  // Only tensors that wait through a recompute move, and each comes back at
  // most one segment early: the device never holds more than without offload.
  for (const char* spec : {"chain:30", "mlp:6", "transformer:2", "gpt:2"}) {
    const Model m = make_preset(spec);
    for (const char* inner : {"sqrt", "every-k:2", "auto"}) {
      const uint64_t plain = simulate(m, make_strategy(inner)->schedule(m)).peak_bytes;
      const uint64_t off = simulate(m, make_strategy(std::string("offload+") + inner)->schedule(m)).peak_bytes;
      EXPECT_LE(off, plain) << spec << " " << inner;
    }
  }
}

// offload+SPEC and SPEC+compress:DTYPE rewrite SPEC's schedule without
// changing its compute, so what SPEC's search proved stands: the records of
// optimal:B come through both wrappers, into the JSON too.
TEST(Offload, TheInnerSearchsSolverRecordsPassThrough) {
  const Model m = make_preset("chain:8:64");
  // The MILP proves this one in about 0.8 s: a 1 s limit let a loaded
  // machine stop one of the three searches short, with another status.
  const std::string opt = "optimal:" + std::to_string(6 * 64) + ":20";
  const auto runs = simulate_strategies(m, {opt, "offload+" + opt, opt + "+compress:bf16", "offload+sqrt"});
  ASSERT_EQ(runs.size(), 4u);
  for (const StrategyRun& r : runs) ASSERT_TRUE(r.ok()) << r.spec << ": " << r.error;
  const std::vector<SolverRecord>& own = runs[0].solvers;
  ASSERT_FALSE(own.empty());
  EXPECT_TRUE(std::any_of(own.begin(), own.end(), [](const SolverRecord& r) { return r.chosen; }));
  for (std::size_t i : {1u, 2u}) {
    SCOPED_TRACE(runs[i].spec);
    ASSERT_EQ(runs[i].solvers.size(), own.size());
    for (std::size_t k = 0; k < own.size(); ++k) {
      EXPECT_EQ(runs[i].solvers[k].solver, own[k].solver);
      EXPECT_EQ(runs[i].solvers[k].family, own[k].family);
      EXPECT_EQ(runs[i].solvers[k].status, own[k].status);
      EXPECT_EQ(runs[i].solvers[k].chosen, own[k].chosen);
      EXPECT_EQ(runs[i].solvers[k].recompute_flops, own[k].recompute_flops);
    }
    // The same compute: the search's recompute, offloaded or compressed.
    EXPECT_EQ(runs[i].sim.recompute_flops, runs[0].sim.recompute_flops);
  }
  EXPECT_TRUE(runs[3].solvers.empty());  // sqrt searches nothing
  const auto j = comparison_json(m, runs, false);
  ASSERT_TRUE(j["strategies"][1].contains("solvers"));
  ASSERT_EQ(j["strategies"][1]["solvers"].size(), own.size());
  EXPECT_EQ(j["strategies"][1]["solvers"][0]["solver"], own[0].solver);
  EXPECT_EQ(j["strategies"][1]["name"], "offload+" + opt);
  EXPECT_FALSE(j["strategies"][3].contains("solvers"));
}

TEST(Offload, SpecErrors) {
  EXPECT_THROW(make_strategy("offload:0"), InputError);
  EXPECT_THROW(make_strategy("offload:x"), InputError);
  EXPECT_THROW(make_strategy("offload+"), InputError);
  EXPECT_THROW(make_strategy("offload+offload:2"), InputError);
  EXPECT_THROW(make_strategy("offload+nope"), InputError);
  EXPECT_EQ(make_strategy("offload+every-k:3")->name(), "offload+every-k:3");
  EXPECT_EQ(split_strategy_list("offload+manual:2,5,sqrt"), (std::vector<std::string>{"offload+manual:2,5", "sqrt"}));
}
