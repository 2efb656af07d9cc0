// Every strategy emits a schedule the validator accepts, on each preset family;
// those that need a chain refuse DAGs with an InputError.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/base/errors.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/registry.h"

using namespace remat;

TEST(AllStrategies, ValidOnPresets) {
  for (const char* spec : {"chain:30", "chain:7:64", "mlp:6", "mlp:3:32:8", "transformer:1", "transformer:2:32:8:2"}) {
    const Model m = make_preset(spec);
    const uint64_t store = simulate(m, make_strategy("store-all")->schedule(m)).peak_bytes;
    for (const std::string& s : std::vector<std::string>{"revolve:1", "revolve:3", "revolve:40", "auto", "selective", "optimal:" + std::to_string(store) + ":2",
                                "budget:" + std::to_string(store)}) {
      try {
        const Schedule sch = make_strategy(s)->schedule(m);
        EXPECT_NO_THROW(validate(m, sch)) << spec << " " << s;
      } catch (const InputError& e) {
        const bool chain_only = s.rfind("revolve", 0) == 0 || s.rfind("budget", 0) == 0;
        EXPECT_TRUE(chain_only && !is_chain(m)) << spec << " " << s << ": " << e.what();
      }
    }
  }
}

TEST(Auto, ChainsGetSqrtAndTransformersTheirResidualStream) {
  const Model c = make_preset("chain:25");
  EXPECT_EQ(auto_checkpoints(c), every_k_boundaries(c, sqrt_interval(c)));
  const Model t = make_preset("transformer:3");
  for (int v : articulation_candidates(t)) {
    // Removing an articulation point disconnects the graph: no edge jumps over it.
    for (int w = 1; w < t.size(); ++w)
      for (int u : t.op(w).inputs) EXPECT_FALSE(u < v && w > v) << t.op(v).name << " jumped by " << t.op(u).name << "->" << t.op(w).name;
  }
  EXPECT_FALSE(auto_checkpoints(t).empty());
}

namespace {

// Connected components of the model's undirected graph without `removed`.
int components_without(const Model& m, int removed) {
  std::vector<std::vector<int>> adj(static_cast<std::size_t>(m.size()));
  for (int v = 0; v < m.size(); ++v)
    for (int u : m.op(v).inputs) {
      adj[static_cast<std::size_t>(u)].push_back(v);
      adj[static_cast<std::size_t>(v)].push_back(u);
    }
  std::vector<char> seen(static_cast<std::size_t>(m.size()), 0);
  int count = 0;
  for (int s = 0; s < m.size(); ++s) {
    if (s == removed || seen[static_cast<std::size_t>(s)]) continue;
    ++count;
    std::vector<int> stack{s};
    seen[static_cast<std::size_t>(s)] = 1;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int w : adj[static_cast<std::size_t>(v)])
        if (w != removed && !seen[static_cast<std::size_t>(w)]) seen[static_cast<std::size_t>(w)] = 1, stack.push_back(w);
    }
  }
  return count;
}

}  // namespace

// Boost's articulation points are exactly the ops whose removal splits the
// undirected graph (checked by removing each op in turn).
TEST(Auto, ArticulationPointsByDefinition) {
  for (const char* spec : {"chain:12", "mlp:3", "transformer:2", "transformer:1:16:4:2"}) {
    const Model m = make_preset(spec);
    std::vector<int> expected;
    for (int v = 1; v < m.loss(); ++v)
      if (components_without(m, v) > 1) expected.push_back(v);
    EXPECT_EQ(articulation_candidates(m), expected) << spec;
  }
}

TEST(Selective, KeepsExactlyTheExpensiveOutputs) {
  for (const char* spec : {"mlp:4", "transformer:2"}) {
    const Model m = make_preset(spec);
    const auto keep = selective_checkpoints(m);
    for (int v = 1; v < m.loss(); ++v) {
      const OpKind k = m.op(v).kind;
      const bool expensive = k == OpKind::Linear || k == OpKind::Dense || k == OpKind::Generic;
      const bool branch = m.consumers(v).size() > 1;
      EXPECT_EQ(std::find(keep.begin(), keep.end(), v) != keep.end(), expensive || branch) << spec << " " << m.op(v).name;
    }
    // In the replay: expensive ops are computed once, recomputed ones are cheap.
    const Schedule s = make_strategy("selective")->schedule(m);
    std::vector<int> fwd(static_cast<std::size_t>(m.size()), 0);
    for (const Instr& i : s.code)
      if (i.kind == InstrKind::Fwd) ++fwd[static_cast<std::size_t>(i.op)];
    int recomputed = 0;
    for (int v = 1; v < m.size(); ++v) {
      const OpKind k = m.op(v).kind;
      if (k == OpKind::Linear || k == OpKind::Dense || k == OpKind::MSELoss || k == OpKind::SoftmaxCELoss)
        EXPECT_EQ(fwd[static_cast<std::size_t>(v)], 1) << spec << " " << m.op(v).name;
      recomputed += fwd[static_cast<std::size_t>(v)] - 1;
    }
    EXPECT_GT(recomputed, 0) << spec;
    EXPECT_EQ(simulate(m, s).recompute_steps, recomputed);
  }
}
