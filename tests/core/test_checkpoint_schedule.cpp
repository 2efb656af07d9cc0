// checkpoint_schedule against a plain reading of its definition: per phase,
// from the last to the first, recompute (in id order) every tensor the phase's
// backward steps read that is not a checkpoint, back to checkpoints, and every
// op of the phase with aux(v) that is not a checkpoint (aux comes only from a
// fwd), after the backward steps at the phase's top that read none of those
// tensors; then the phase's other backward steps. A checkpointed view keeps its
// storage: its input is a checkpoint too, down to the owner. The generator takes shortcuts (runs on a chain,
// scans instead of sorts, one allocation); the schedules must be identical.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "core/strategies/checkpoint_sets.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"
#include "tests/support/model_builders.h"

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
    int last = p + 1 < static_cast<int>(phase_start.size()) ? phase_start[static_cast<std::size_t>(p) + 1] - 1 : n - 1;
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
      // The backward steps at the top that read none of them go first.
      for (; last >= first; --last) {
        bool reads = m.op(last).aux_bytes > 0 && needed.count(last);
        for (int t : m.op(last).saved) reads = reads || needed.count(t);
        if (reads) break;
        code.push_back({InstrKind::Bwd, last});
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

// x -> a = Linear -> t = Tanh -> b = Linear -> r = ReLU (checkpoint) ->
// c = Linear -> MSE: the phase [a, r] recomputes a and t (bwd b reads t);
// bwd r reads only r, kept, so it runs before them, as PyTorch's checkpointing
// recomputes a region when backward first unpacks one of its saved tensors
// (the ResNet's `manual:` plans, docs/memory-model.md): r and G(r) are gone
// when the recomputation runs.
TEST(CheckpointSchedule, BackwardStepsReadingNothingRecomputedRunFirst) {
  using testing_ops = std::vector<int>;
  Model m;
  m.add(remat::testing::make_op(OpKind::Input, {}, {4, 8}));
  m.add(remat::testing::make_op(OpKind::Linear, {0}, {4, 8}));  // 1 a
  m.add(remat::testing::make_op(OpKind::Tanh, {1}));            // 2 t
  m.add(remat::testing::make_op(OpKind::Linear, {2}, {4, 8}));  // 3 b
  m.add(remat::testing::make_op(OpKind::ReLU, {3}));            // 4 r
  m.add(remat::testing::make_op(OpKind::Linear, {4}, {4, 8}));  // 5 c
  m.add(remat::testing::make_op(OpKind::MSELoss, {5}));         // 6
  m.finalize();
  ASSERT_EQ(m.op(4).saved, testing_ops{4});
  const Schedule s = make_strategy("manual:4")->schedule(m);
  std::vector<Instr> order;  // without the frees
  for (const Instr& i : s.code)
    if (i.kind == InstrKind::Fwd || i.kind == InstrKind::Bwd) order.push_back(i);
  using K = InstrKind;
  const std::vector<Instr> expected = {{K::Fwd, 1}, {K::Fwd, 2}, {K::Fwd, 3}, {K::Fwd, 4}, {K::Fwd, 5}, {K::Fwd, 6},
                                       {K::Bwd, 6}, {K::Bwd, 5}, {K::Bwd, 4}, {K::Fwd, 1}, {K::Fwd, 2}, {K::Bwd, 3},
                                       {K::Bwd, 2}, {K::Bwd, 1}};
  EXPECT_EQ(order, expected);
  // 128 B a tensor. Before bwd r: x, r, G(r) (3u); bwd r makes G(b) (4u),
  // then G(r) and r go (2u: x, G(b)); the recomputation adds a and t (4u),
  // a goes (3u), bwd b makes G(t) (4u). Recomputing first would have held x,
  // r, G(r), a and t (5u) at fwd t. The forward pass and the final phase
  // peak at 4u too (bwd c: x, r, G(c), G(r)).
  const Simulation sim = simulate(m, s);
  EXPECT_EQ(sim.peak_bytes, 4 * 128u);
  std::size_t recompute_t = 0;
  for (std::size_t i = 0, fwd_t = 0; i < s.code.size(); ++i)
    if (s.code[i].kind == K::Fwd && s.code[i].op == 2 && ++fwd_t == 2) recompute_t = i;
  EXPECT_EQ(sim.timeline[recompute_t], 4 * 128u);
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
