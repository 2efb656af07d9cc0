// Exhaustive search over ALL schedules of a small chain under a peak budget:
// every sequence of fwd, bwd and free instructions the memory model accepts
// (docs/memory-model.md), found by Dijkstra over the resident set. Independent of the
// strategies it judges: it knows only the model's bytes, saved sets and FLOPs.
#pragma once
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/model/model.h"

namespace remat::test {

// The least cost (forward steps when `count_steps`, else forward FLOPs) of a
// schedule of `m` (a chain: op v reads op v-1) whose peak stays within
// `budget` and that computes the loss once at least; +inf when none fits.
// States: (resident activations, next backward step, loss computed). On a
// chain the backward steps run from the loss down, G(i) is resident exactly
// before bwd i, and freeing G(i) right after bwd i is never worse.
inline double least_chain_cost(const Model& m, uint64_t budget, bool count_steps) {
  const int n = m.size();  // ops 0..n-1, the loss is n-1
  if (n > 24) throw std::logic_error("least_chain_cost: chain too long to search");
  auto bytes = [&](int v) { return m.op(v).bytes; };
  auto reads = [&](int reader, int t) {
    for (int s : m.op(reader).saved)
      if (s == t) return true;
    return false;
  };
  struct State {
    uint32_t act;
    int next;
    bool loss;
    bool operator==(const State&) const = default;
  };
  auto key = [&](const State& s) { return (uint64_t{s.act} << 8 | static_cast<uint64_t>(s.next)) << 1 | (s.loss ? 1 : 0); };
  std::unordered_map<uint64_t, double> dist;
  using Item = std::pair<double, State>;
  auto cmp = [](const Item& a, const Item& b) { return a.first > b.first; };
  std::priority_queue<Item, std::vector<Item>, decltype(cmp)> queue(cmp);
  const State start{1u, n - 1, false};
  dist[key(start)] = 0;
  queue.push({0, start});
  while (!queue.empty()) {
    const auto [d, s] = queue.top();
    queue.pop();
    if (dist[key(s)] < d) continue;
    if (s.next == 0) return d;
    uint64_t mem = m.grad_bytes(s.next);
    for (int v = 0; v < n; ++v)
      if (s.act >> v & 1) mem += bytes(v);
    auto push = [&](const State& t, double c) {
      auto [it, fresh] = dist.try_emplace(key(t), c);
      if (!fresh && it->second <= c) return;
      it->second = c;
      queue.push({c, t});
    };
    for (int v = 0; v < n; ++v)
      if (s.act >> v & 1) push({s.act & ~(1u << v), s.next, s.loss}, d);
    const int i = s.next;
    bool ready = i != n - 1 || s.loss;
    for (int t : m.op(i).saved) ready = ready && (s.act >> t & 1);
    if (ready && mem + m.grad_bytes(i - 1) <= budget) push({s.act, i - 1, s.loss}, d);
    for (int v = 1; v < n; ++v) {
      if (!(s.act >> (v - 1) & 1) || (s.act >> v & 1) || mem + bytes(v) > budget) continue;
      const double c = d + (count_steps ? 1.0 : m.op(v).fwd_flops);
      // The loss's output is read by nothing but (perhaps) its own backward.
      const bool keep = v != n - 1 || reads(v, v);
      push({keep ? s.act | (1u << v) : s.act, s.next, s.loss || v == n - 1}, c);
    }
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace remat::test
