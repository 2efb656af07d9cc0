#include "core/strategies/milp_facts.h"

#include <limits>

#include "core/model/model.h"
#include "core/sim/simulator.h"

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
  // Backward runs L..1 in every schedule and with_frees drops G(b) right
  // after bwd b, so the gradients of each stage are the model's, whatever is
  // recomputed: replayed once under the memory model's rule (an Add's inputs
  // share its gradient's storage, ResidentSet).
  ResidentSet r(m);
  const uint64_t input = r.bytes;
  for (int b = L; b >= 1; --b) {
    const auto B = static_cast<std::size_t>(b);
    grads[B] = r.bytes - input;
    new_grads[B] = r.grad_bytes_made_by(m, b);
    r.apply(m, Instr{InstrKind::Bwd, b});
    if (r.grad[B]) r.apply(m, Instr{InstrKind::FreeGrad, b});
  }
}

}  // namespace remat
