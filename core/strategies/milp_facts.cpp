#include "core/strategies/milp_facts.h"

#include <limits>

#include "core/model/model.h"

namespace remat {

MilpFacts::MilpFacts(const Model& m) : L(m.loss()) {
  const auto n = static_cast<std::size_t>(m.size());
  own.resize(n), a.resize(n), aux.resize(n), f.resize(n), in.resize(n), readers.resize(n), saved.resize(n);
  last_read.assign(n, -1), first_use.assign(n, std::numeric_limits<int>::max()), grads.assign(n, 0), new_grads.assign(n, 0);
  for (int v = 0; v < m.size(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    own[i] = m.storage(v), a[i] = m.op(v).bytes, aux[i] = m.op(v).aux_bytes, f[i] = m.op(v).fwd_flops;
  }
  for (int v = 0; v < m.size(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    for (int u : m.op(v).inputs) add_once(in[i], own[static_cast<std::size_t>(u)]);
    for (int u : m.op(v).saved) add_once(saved[i], own[static_cast<std::size_t>(u)]);
    for (int s : in[i]) {
      readers[static_cast<std::size_t>(s)].push_back(v);
      last_read[static_cast<std::size_t>(s)] = v;
      if (own[i] != s) first_use[static_cast<std::size_t>(s)] = std::min(first_use[static_cast<std::size_t>(s)], v);
    }
    for (int s : saved[i]) first_use[static_cast<std::size_t>(s)] = std::min(first_use[static_cast<std::size_t>(s)], v);
  }
  // Backward runs L..1, so G(u) lives from bwd of its last consumer to bwd u.
  std::vector<int> last_consumer(n, -1);
  for (int v = 0; v < m.size(); ++v)
    if (!m.consumers(v).empty()) last_consumer[static_cast<std::size_t>(v)] = m.consumers(v).back();
  for (int b = 1; b <= L; ++b)
    for (int u = 1; u <= b; ++u)
      if (m.has_grad_tensor(u) && last_consumer[static_cast<std::size_t>(u)] > b) grads[static_cast<std::size_t>(b)] += m.grad_bytes(u);
  for (int b = 1; b <= L; ++b) {
    std::vector<int> seen;
    for (int u : m.op(b).inputs)
      if (m.has_grad_tensor(u) && last_consumer[static_cast<std::size_t>(u)] == b && add_once(seen, u))
        new_grads[static_cast<std::size_t>(b)] += m.grad_bytes(u);
  }
}

}  // namespace remat
