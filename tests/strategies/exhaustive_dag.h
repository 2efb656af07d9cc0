// Exhaustive search over the schedules of a small DAG whose backward steps run
// in reverse op order, by Dijkstra over (position, resident activations). Two
// families:
// - `stages`: the MILP's (milp_schedule.h): the forward pass computes each op
//   once in op order; before each backward step any ops are recomputed, each
//   at most once and in op order; any tensor freed at any time.
// - all: any op recomputed any number of times, in any order, also during the
//   forward pass.
// Memory follows docs/memory-model.md: a fwd holds its inputs and output, a bwd its saved
// tensors, its gradient and the gradients it creates; G(u) lives from the
// backward of u's last consumer to bwd u; a plain Add's inputs and a
// Reshape's input get its G's storage (no bytes), and a part added to a G
// whose storage another resident G shares goes to a new storage; a storage
// counts once while any of its aliases (views) is resident, and an op is not
// recomputed while a view still holds its previous storage; aux(v) is made by
// every fwd v (not while the previous one is resident), read by bwd v, and
// freed at any time.
// Independent of the strategies.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/model/model.h"

namespace remat::test {

inline double least_dag_recompute(const Model& m, uint64_t budget, bool stages) {
  const int n = m.size(), L = m.loss();
  if (n > 20 || 2 * L + 2 >= 64) throw std::logic_error("least_dag_recompute: graph too large to search");
  // Gradient bytes resident before bwd b, and those bwd b creates: the
  // backward replayed, each G naming the storage it is (-1: none).
  std::vector<uint64_t> grads(static_cast<std::size_t>(n), 0), created(static_cast<std::size_t>(n), 0);
  std::vector<int> store(static_cast<std::size_t>(n), -1);
  auto aliases = [&](int s) { return std::count(store.begin(), store.end(), s); };
  for (int b = L; b >= 1; --b) {
    for (int s = 0; s < n; ++s)
      if (aliases(s) > 0) grads[static_cast<std::size_t>(b)] += m.grad_bytes(s);
    const Op& op = m.op(b);
    const bool passes_g = (op.kind == OpKind::Add && op.inputs.size() == 2 && op.inputs[0] != op.inputs[1]) ||
                          op.kind == OpKind::Reshape;  // G(b) itself, or reshaped: the same storage
    for (int u : op.inputs) {
      if (!m.has_grad_tensor(u)) continue;
      auto& su = store[static_cast<std::size_t>(u)];
      if (su < 0 && passes_g && m.has_grad_tensor(b) && m.op(u).dtype == op.dtype && m.grad_bytes(u) == m.grad_bytes(b)) {
        su = store[static_cast<std::size_t>(b)];
      } else if (su < 0 || aliases(su) > 1) {
        su = u;
        created[static_cast<std::size_t>(b)] += m.grad_bytes(u);
      }
    }
    store[static_cast<std::size_t>(b)] = -1;
  }
  // Position: 1..L the next first computation (forward pass), then L+1+k
  // the backward step of op L-k is next. `after`: last op recomputed in this stage.
  struct State {
    uint32_t act, aux;
    int pos, after;
  };
  auto key = [](const State& s) {
    return ((uint64_t{s.act} << 20 | uint64_t{s.aux}) << 6 | static_cast<uint64_t>(s.pos)) << 5 | static_cast<uint64_t>(s.after);
  };
  std::unordered_map<uint64_t, double> dist;
  using Item = std::pair<double, State>;
  auto cmp = [](const Item& a, const Item& b) { return a.first > b.first; };
  std::priority_queue<Item, std::vector<Item>, decltype(cmp)> queue(cmp);
  auto push = [&](const State& s, double d) {
    auto [it, fresh] = dist.try_emplace(key(s), d);
    if (!fresh && it->second <= d) return;
    it->second = d;
    queue.push({d, s});
  };
  push({1u, 0u, 1, 0}, 0);
  auto has = [](uint32_t set, int u) { return (set >> u & 1) != 0; };
  auto inputs_resident = [&](uint32_t act, int v) {
    for (int u : m.op(v).inputs)
      if (!has(act, u)) return false;
    return true;
  };
  auto storage_held = [&](uint32_t act, int s) {
    for (int u = 0; u < n; ++u)
      if (has(act, u) && m.storage(u) == s) return true;
    return false;
  };
  // The bytes fwd v adds to `act`, or -1 when it may not run there.
  auto fwd_bytes = [&](const State& s, int v) -> int64_t {
    if (has(s.act, v) || has(s.aux, v) || !inputs_resident(s.act, v)) return -1;
    const Op& op = m.op(v);
    if (!op.view && storage_held(s.act, v)) return -1;
    return static_cast<int64_t>((op.view ? 0 : op.bytes) + op.aux_bytes);
  };
  auto computed = [&](const State& s, int v) {
    State t = s;
    t.act |= 1u << v;
    if (m.op(v).aux_bytes > 0) t.aux |= 1u << v;
    return t;
  };
  while (!queue.empty()) {
    const auto [d, s] = queue.top();
    queue.pop();
    if (dist[key(s)] < d) continue;
    const bool forward = s.pos <= L;
    const int b = forward ? -1 : L - (s.pos - L - 1);  // next backward step
    if (!forward && b == 0) return d;
    uint64_t mem = forward ? 0 : grads[static_cast<std::size_t>(b)];
    for (int u = 0; u < n; ++u) {
      if (m.storage(u) == u && storage_held(s.act, u)) mem += m.op(u).bytes;
      if (has(s.aux, u)) mem += m.op(u).aux_bytes;
    }
    for (int u = 0; u < n; ++u) {
      if (has(s.act, u)) push({s.act & ~(1u << u), s.aux, s.pos, s.after}, d);
      if (has(s.aux, u)) push({s.act, s.aux & ~(1u << u), s.pos, s.after}, d);
    }
    if (forward) {  // the next first computation
      const int t = s.pos;
      const int64_t add = fwd_bytes(s, t);
      if (add >= 0 && mem + static_cast<uint64_t>(add) <= budget) {
        State next = computed(s, t);
        next.pos = t + 1, next.after = 0;
        push(next, d);
      }
    } else {  // bwd b
      bool ready = m.op(b).aux_bytes == 0 || has(s.aux, b);
      for (int u : m.op(b).saved) ready = ready && has(s.act, u);
      if (ready && mem + created[static_cast<std::size_t>(b)] <= budget) push({s.act, s.aux, s.pos + 1, 0}, d);
    }
    // Recomputations: computed before, inputs resident, output not.
    const int top = forward ? s.pos - 1 : b;
    if (stages && forward) continue;
    for (int v = stages ? s.after + 1 : 1; v <= top; ++v) {
      const int64_t add = fwd_bytes(s, v);
      if (add < 0 || mem + static_cast<uint64_t>(add) > budget) continue;
      State next = computed(s, v);
      next.after = stages ? v : 0;
      push(next, d + m.op(v).fwd_flops);
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace remat::test
