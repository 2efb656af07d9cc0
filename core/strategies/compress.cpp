#include "core/strategies/compress.h"

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

Schedule with_compression(const Model& model, Schedule inner, Packing p) {
  auto unchanged = [&] {
    const std::string why = "compress:" + std::string(packing_name(p)) +
                            ": no checkpoint waits for a recompute in this schedule; nothing is compressed";
    inner.note = inner.note.empty() ? why : inner.note + "; " + why;
    return std::move(inner);
  };
  const BackwardGap g = backward_gap(model, inner.code);
  if (g.first_recompute == kNone) return unchanged();

  // (insert before this index, instruction), in the order they go in. A
  // storage some view aliases stays: converting it would change what the view
  // reads. After its first free or recompute in the backward, A(c) is another value.
  std::vector<std::pair<std::size_t, Instr>> inserts;
  for (std::size_t c = 0; c < g.aliased.size(); ++c) {
    const Op& op = model.op(static_cast<int>(c));
    const bool kept = g.at_backward.act[c] || g.at_backward.host[c] == 1;
    if (!kept || g.aliased[c] || !compressible(op) || packed_bytes(op.bytes, p) >= op.bytes) continue;
    const std::size_t read = g.backward_read[c];
    if (read == kNone || !g.read_by_fwd[c] || g.backward_free[c] < read || g.backward_fwd[c] < read) continue;
    const int v = static_cast<int>(c);
    const std::size_t at = g.forward_last[c] == kNone ? 0 : g.forward_last[c] + 1;  // the input: at once
    inserts.push_back({at, {compress_kind(p), v}});
    inserts.push_back({at, {InstrKind::FreeAct, v}});
    inserts.push_back({read, {InstrKind::Decompress, v}});
    inserts.push_back({read, {InstrKind::FreePacked, v}});
  }
  if (inserts.empty()) return unchanged();
  // Pairs stay together and in op order at one index.
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return with_inserts(std::move(inner), inserts);
}

std::unique_ptr<Strategy> make_compress(std::unique_ptr<Strategy> inner, Packing p, std::string spec) {
  // At most four instructions per op (compress, free, decompress, free).
  return make_rewriting(std::move(inner), std::move(spec), 4,
                        [p](const Model& m, Schedule s) { return with_compression(m, std::move(s), p); });
}

}  // namespace remat
