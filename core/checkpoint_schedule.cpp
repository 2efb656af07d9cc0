#include "core/checkpoint_schedule.h"

#include <algorithm>

#include "core/model.h"

namespace remat {

Schedule checkpoint_schedule(const Model& model, std::vector<char> checkpoint,
                             const std::vector<int>& phase_start, std::string strategy) {
  const int n = model.size();
  checkpoint.resize(static_cast<std::size_t>(n), 0);
  checkpoint[0] = 1;
  // Keeping a view keeps its storage: the aliases down to the owner are kept
  // too (free), so a recompute never makes a second copy of a held storage.
  for (int v = n; v-- > 1;) {
    if (checkpoint[static_cast<std::size_t>(v)] && model.op(v).view)
      checkpoint[static_cast<std::size_t>(model.op(v).inputs[0])] = 1;
  }
  std::vector<Instr> code;
  code.reserve(static_cast<std::size_t>(3 * n));
  for (int v = 1; v < n; ++v) code.push_back({InstrKind::Fwd, v});

  std::vector<int> stamp(static_cast<std::size_t>(n), -1);  // phase that last recomputed A(v)
  std::vector<int> stack, needed;
  for (int p = static_cast<int>(phase_start.size()) - 1; p >= 0; --p) {
    const int first = phase_start[static_cast<std::size_t>(p)];
    const int last = p + 1 < static_cast<int>(phase_start.size()) ? phase_start[static_cast<std::size_t>(p) + 1] - 1 : n - 1;
    const bool final_phase = p + 1 == static_cast<int>(phase_start.size());
    if (!final_phase) {
      auto available = [&](int t) { return checkpoint[static_cast<std::size_t>(t)] || stamp[static_cast<std::size_t>(t)] == p; };
      needed.clear();
      auto need = [&](int t) {
        stamp[static_cast<std::size_t>(t)] = p;  // mark now; emitted below in order
        needed.push_back(t);
        stack.push_back(t);
      };
      for (int v = first; v <= last; ++v) {
        for (int t : model.op(v).saved) {
          if (!available(t)) need(t);
        }
        // aux(v) comes only from a fwd v: kept from the forward pass for a
        // checkpoint, otherwise made again by recomputing v in this phase.
        if (model.op(v).aux_bytes > 0 && !available(v)) need(v);
      }
      while (!stack.empty()) {  // iterative: recompute chains can be a million deep
        const int t = stack.back();
        stack.pop_back();
        for (int u : model.op(t).inputs) {
          if (!available(u)) need(u);
        }
      }
      std::sort(needed.begin(), needed.end());
      for (int t : needed) code.push_back({InstrKind::Fwd, t});
    }
    for (int v = last; v >= first; --v) code.push_back({InstrKind::Bwd, v});
  }
  return with_frees(model, std::move(code), std::move(strategy));
}

Schedule segment_schedule(const Model& model, const std::vector<int>& checkpoints, std::string strategy) {
  const int n = model.size();
  std::vector<char> keep(static_cast<std::size_t>(n), 0);
  for (int c : checkpoints) keep[static_cast<std::size_t>(c)] = 1;
  std::vector<int> starts{1};
  for (int v = 1; v < n - 1; ++v) {
    if (keep[static_cast<std::size_t>(v)]) starts.push_back(v + 1);
  }
  return checkpoint_schedule(model, std::move(keep), starts, std::move(strategy));
}

}  // namespace remat
