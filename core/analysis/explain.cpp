#include "core/analysis/explain.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/sim/compression.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"

namespace remat {

std::string_view held_for_name(HeldFor h) {
  switch (h) {
    case HeldFor::Checkpoint: return "checkpoint";
    case HeldFor::AwaitsBackward: return "waiting for its backward";
    case HeldFor::Recomputed: return "being recomputed";
    case HeldFor::Gradient: return "gradient";
    case HeldFor::Private: return "private saved tensors (aux)";
  }
  return "?";
}

const PeakGroup* PeakExplanation::group(HeldFor h) const {
  for (const auto& g : groups)
    if (g.reason == h) return &g;
  return nullptr;
}

PeakExplanation explain_peak(const Model& m, const Schedule& s) {
  const Simulation sim = simulate(m, s);
  PeakExplanation e;
  e.strategy = s.strategy;
  e.peak_index = sim.peak_index;
  e.peak_bytes = sim.peak_bytes;
  if (s.code.empty()) return e;
  e.instr = s.code[sim.peak_index];
  const auto n = static_cast<std::size_t>(m.size());
  ResidentSet r(m);
  std::vector<uint8_t> computed(n, 0), recomputed(n, 0);
  for (std::size_t i = 0; i <= sim.peak_index; ++i) {
    const Instr ins = s.code[i];
    if (ins.kind == InstrKind::Fwd) {
      recomputed[static_cast<std::size_t>(ins.op)] = computed[static_cast<std::size_t>(ins.op)];
      computed[static_cast<std::size_t>(ins.op)] = 1;
    }
    r.apply(m, ins);
  }
  // Which forward-pass copies still feed a recompute before they are freed.
  std::vector<uint8_t> open(r.act), feeds(n, 0);
  for (std::size_t i = sim.peak_index + 1; i < s.code.size(); ++i) {
    const Instr ins = s.code[i];
    if (ins.kind == InstrKind::FreeAct) open[static_cast<std::size_t>(ins.op)] = 0;
    if (ins.kind == InstrKind::Fwd)
      for (int u : m.op(ins.op).inputs)
        if (open[static_cast<std::size_t>(u)]) feeds[static_cast<std::size_t>(u)] = 1;
  }
  PeakGroup g[5] = {{HeldFor::Checkpoint, 0, {}}, {HeldFor::AwaitsBackward, 0, {}}, {HeldFor::Recomputed, 0, {}},
                    {HeldFor::Gradient, 0, {}}, {HeldFor::Private, 0, {}}};
  std::vector<uint8_t> counted(n, 0);  // storages already in a group
  for (std::size_t v = 0; v < n; ++v) {
    if (r.act[v]) {
      const HeldFor h = recomputed[v] ? HeldFor::Recomputed
                        : (v == 0 || feeds[v]) ? HeldFor::Checkpoint : HeldFor::AwaitsBackward;
      auto& gr = g[static_cast<int>(h)];
      gr.ops.push_back(static_cast<int>(v));
      const auto owner = static_cast<std::size_t>(m.storage(static_cast<int>(v)));
      if (!counted[owner]) gr.bytes += m.op(static_cast<int>(owner)).bytes;
      counted[owner] = 1;
    }
    if (r.host[v]) {  // only storage owners move: A(v) whole (host 1), or its compressed copy
      e.host_ops.push_back(static_cast<int>(v));
      const uint64_t full = m.op(static_cast<int>(v)).bytes;
      e.host_bytes += r.host[v] == 1 ? full : packed_bytes(full, static_cast<Packing>(r.host[v] - 1));
    }
    if (r.packed[v]) {  // a compressed checkpoint waits for the recompute that reads it
      g[0].ops.push_back(static_cast<int>(v));
      g[0].bytes += packed_bytes(m.op(static_cast<int>(v)).bytes, static_cast<Packing>(r.packed[v]));
    }
    if (r.aux[v]) {
      g[4].ops.push_back(static_cast<int>(v));
      g[4].bytes += m.op(static_cast<int>(v)).aux_bytes;
    }
  }
  std::vector<uint8_t> grad_counted(n, 0);  // gradient storages already counted (an Add's inputs share one)
  for (std::size_t v = 0; v < n; ++v) {
    if (r.grad[v] && m.has_grad_tensor(static_cast<int>(v))) {
      g[3].ops.push_back(static_cast<int>(v));
      if (!grad_counted[static_cast<std::size_t>(r.grad_storage[v])]++) g[3].bytes += m.grad_bytes(static_cast<int>(v));
    }
  }
  for (auto& gr : g)
    if (!gr.ops.empty()) e.groups.push_back(std::move(gr));
  return e;
}

namespace {

std::string op_list(const Model& m, const std::vector<int>& ops, std::size_t max = 12) {
  std::string s;
  for (std::size_t i = 0; i < ops.size() && i < max; ++i) {
    const Op& op = m.op(ops[i]);
    s += (i ? ", " : "") + (op.name.empty() ? "op" + std::to_string(ops[i]) : op.name);
  }
  if (ops.size() > max) s += ", ... (" + std::to_string(ops.size() - max) + " more)";
  return s;
}

}  // namespace

std::string explanation_text(const Model& m, const PeakExplanation& e) {
  std::ostringstream o;
  o << "strategy " << e.strategy << " on " << m.name << ": peak " << e.peak_bytes << " bytes at instruction "
    << e.peak_index << " (" << to_string(e.instr, m) << ")\n";
  for (const auto& g : e.groups) {
    o << "  " << held_for_name(g.reason) << ": " << g.bytes << " bytes, " << g.ops.size() << " tensor"
      << (g.ops.size() == 1 ? "" : "s") << " [" << op_list(m, g.ops) << "]\n";
  }
  if (!e.host_ops.empty())
    o << "  on the host (not in the device peak): " << e.host_bytes << " bytes, " << e.host_ops.size() << " tensor"
      << (e.host_ops.size() == 1 ? "" : "s") << " [" << op_list(m, e.host_ops) << "]\n";
  const PeakGroup* ck = e.group(HeldFor::Checkpoint);
  const PeakGroup* wait = e.group(HeldFor::AwaitsBackward);
  const PeakGroup* rec = e.group(HeldFor::Recomputed);
  if (wait && wait->bytes * 2 >= e.peak_bytes)
    o << "why: most of the peak is forward-pass activations still waiting for their backward; checkpoints earlier in "
         "the graph would let them be freed and recomputed\n";
  else if (rec && rec->bytes * 2 >= e.peak_bytes)
    o << "why: most of the peak is one segment being recomputed; more (or better placed) checkpoints shorten the "
         "segments\n";
  else if (ck && ck->bytes * 2 >= e.peak_bytes)
    o << "why: most of the peak is checkpoints; fewer of them trade memory for recomputation\n";
  return o.str();
}

nlohmann::json explanation_json(const Model& m, const PeakExplanation& e) {
  nlohmann::json j{{"strategy", e.strategy}, {"peak_bytes", e.peak_bytes}, {"peak_index", e.peak_index},
                   {"instruction", to_string(e.instr, m)}};
  j["groups"] = nlohmann::json::array();
  for (const auto& g : e.groups) {
    nlohmann::json names = nlohmann::json::array();
    for (int v : g.ops) names.push_back(m.op(v).name);
    j["groups"].push_back({{"reason", held_for_name(g.reason)}, {"bytes", g.bytes}, {"ops", g.ops}, {"names", names}});
  }
  if (!e.host_ops.empty()) {
    nlohmann::json names = nlohmann::json::array();
    for (int v : e.host_ops) names.push_back(m.op(v).name);
    j["host"] = {{"bytes", e.host_bytes}, {"ops", e.host_ops}, {"names", names}};
  }
  return j;
}

}  // namespace remat
