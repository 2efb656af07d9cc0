#include "core/strategies/offload.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/model/model.h"
#include "core/strategies/backward_gap.h"
#include "core/strategies/rewriting.h"

namespace remat {
namespace {

constexpr std::size_t kNone = BackwardGap::kNone;

}  // namespace

Schedule with_offloads(const Model& model, Schedule inner) {
  const BackwardGap g = backward_gap(model, inner.code);
  if (g.first_recompute == kNone) return inner;  // nothing waits through a recompute

  // A storage some view aliases stays: moving it would move the view's bytes too.
  std::vector<int> moved;
  for (std::size_t c = 0; c < g.aliased.size(); ++c) {
    const bool kept = g.at_backward.act[c] && !model.op(static_cast<int>(c)).view && !g.aliased[c];
    if (kept && g.backward_read[c] != kNone && g.backward_read[c] >= g.first_recompute &&
        g.backward_read[c] < g.backward_free[c])
      moved.push_back(static_cast<int>(c));
  }
  std::sort(moved.begin(), moved.end(), [&](int a, int b) {
    return g.backward_read[static_cast<std::size_t>(a)] < g.backward_read[static_cast<std::size_t>(b)];
  });

  // (insert before this index, instruction); offloads before fetches at one index.
  std::vector<std::pair<std::size_t, Instr>> inserts;
  std::size_t fetch_at = g.first_bwd;
  for (int c : moved) {
    const auto cc = static_cast<std::size_t>(c);
    const std::size_t offload_at = g.forward_last[cc] == kNone ? 0 : g.forward_last[cc] + 1;  // the input: at once
    if (offload_at < fetch_at) {  // else it would come straight back
      inserts.push_back({offload_at, {InstrKind::Offload, c}});
      inserts.push_back({fetch_at, {InstrKind::Fetch, c}});
    }
    fetch_at = g.backward_read[cc];
  }
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second.kind == InstrKind::Offload && b.second.kind == InstrKind::Fetch;
  });
  return with_inserts(std::move(inner), inserts);
}

std::unique_ptr<Strategy> make_offload(std::unique_ptr<Strategy> inner, std::string name) {
  // At most one offload and one fetch per op on top of the inner schedule.
  return make_rewriting(std::move(inner), std::move(name), 2,
                        [](const Model& m, Schedule s) { return with_offloads(m, std::move(s)); });
}

}  // namespace remat
