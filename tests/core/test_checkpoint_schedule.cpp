// checkpoint_schedule against a plain reading of its definition: per phase,
// from the last to the first, recompute (in id order) every tensor the phase's
// backward steps read that is not a checkpoint, back to checkpoints, and every
// op of the phase with aux(v) that is not a checkpoint (aux comes only from a
// fwd); then the phase's backward steps. A checkpointed view keeps its
// storage: its input is a checkpoint too, down to the owner. The generator takes shortcuts (runs on a chain,
// scans instead of sorts, one allocation); the schedules must be identical.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/strategies/checkpoint_sets.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

using namespace remat;

namespace {

Schedule reference(const Model& m, std::vector<char> checkpoint, const std::vector<int>& phase_start) {
  const int n = m.size();
  checkpoint.resize(static_cast<std::size_t>(n), 0);
  checkpoint[0] = 1;
  for (int v = n - 1; v > 0; --v)
    if (checkpoint[static_cast<std::size_t>(v)] && m.op(v).view) checkpoint[static_cast<std::size_t>(m.op(v).inputs[0])] = 1;
  std::vector<Instr> code;
  for (int v = 1; v < n; ++v) code.push_back({InstrKind::Fwd, v});
  for (int p = static_cast<int>(phase_start.size()) - 1; p >= 0; --p) {
    const int first = phase_start[static_cast<std::size_t>(p)];
    const int last = p + 1 < static_cast<int>(phase_start.size()) ? phase_start[static_cast<std::size_t>(p) + 1] - 1 : n - 1;
    if (p + 1 < static_cast<int>(phase_start.size())) {
      std::set<int> needed;
      std::vector<int> todo;
      for (int v = first; v <= last; ++v) {
        for (int t : m.op(v).saved) todo.push_back(t);
        if (m.op(v).aux_bytes > 0) todo.push_back(v);
      }
      while (!todo.empty()) {
        const int t = todo.back();
        todo.pop_back();
        if (checkpoint[static_cast<std::size_t>(t)] || !needed.insert(t).second) continue;
        for (int u : m.op(t).inputs) todo.push_back(u);
      }
      for (int t : needed) code.push_back({InstrKind::Fwd, t});
    }
    for (int v = last; v >= first; --v) code.push_back({InstrKind::Bwd, v});
  }
  return with_frees(m, std::move(code), "reference");
}

}  // namespace

TEST(CheckpointSchedule, EqualsItsDefinitionOnChainsAndDags) {
  std::mt19937 rng(11);
  for (const char* spec : {"chain:2", "chain:30", "mlp:6:8:2", "transformer:2:8:2:1", "transformer:3:8:4:1",
                           "gpt:1:16:2:8:1:f32:64", "resnet:18:4:32:1:10"}) {
    const Model m = make_preset(spec);
    const int n = m.size();
    // Random checkpoint sets, with phases after each checkpoint (segments),
    // after every op (recompute-all's), or anywhere (a phase may then span
    // checkpoints and recompute several runs).
    for (int trial = 0; trial < 45; ++trial) {
      std::vector<char> ckpt(static_cast<std::size_t>(n), 0);
      for (int v = 1; v < m.loss(); ++v) ckpt[static_cast<std::size_t>(v)] = rng() % (2 + trial % 4) == 0;
      std::vector<int> starts{1};
      for (int v = 1; v < n - 1; ++v) {
        const bool start = trial % 3 == 0 ? ckpt[static_cast<std::size_t>(v)] != 0 : trial % 3 == 1 || rng() % 3 == 0;
        if (start) starts.push_back(v + 1);
      }
      SCOPED_TRACE(std::string(spec) + " trial " + std::to_string(trial));
      const Schedule got = checkpoint_schedule(m, ckpt, starts, "t");
      EXPECT_EQ(got.code, reference(m, ckpt, starts).code);
      EXPECT_EQ(checkpoint_schedule_size(m, ckpt, starts).instructions, got.code.size());
      (void)simulate(m, got);  // and it is valid
    }
  }
}

TEST(Simulate, WithoutTheTimelineTheFiguresAreTheSame) {
  const Model m = make_preset("transformer:2:8:2:1");
  for (const char* spec : {"store-all", "recompute-all", "sqrt", "selective"}) {
    const Schedule s = make_strategy(spec)->schedule(m);
    const Simulation full = simulate(m, s), lean = simulate(m, s, {.timeline = false});
    EXPECT_EQ(full.timeline.size(), s.code.size());
    EXPECT_TRUE(lean.timeline.empty());
    EXPECT_EQ(lean.peak_bytes, full.peak_bytes) << spec;
    EXPECT_EQ(lean.peak_index, full.peak_index) << spec;
    EXPECT_EQ(lean.forward_steps, full.forward_steps) << spec;
    EXPECT_EQ(lean.recompute_steps, full.recompute_steps) << spec;
    EXPECT_EQ(lean.flops, full.flops) << spec;
    EXPECT_EQ(lean.overhead, full.overhead) << spec;
  }
}

TEST(Schedule, InstructionsAreFourBytes) {
  EXPECT_EQ(sizeof(Instr), 4u);
  // The largest op id a model may have survives the packing.
  const Instr i{InstrKind::FreeGrad, Model::kMaxOps - 1};
  EXPECT_EQ(i.op, Model::kMaxOps - 1);
  EXPECT_EQ(i.kind, InstrKind::FreeGrad);
  const Instr neg{InstrKind::Fwd, -1};  // the validator reports such ids; they must stay negative
  EXPECT_EQ(neg.op, -1);
}
