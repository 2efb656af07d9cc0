#include "core/strategies/compress.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/instr_reads.h"
#include "core/model.h"
#include "core/simulator.h"

namespace remat {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

class Compress final : public Strategy {
 public:
  Compress(std::unique_ptr<Strategy> inner, Packing p, std::string name)
      : inner_(std::move(inner)), packing_(p), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Schedule schedule(const Model& m) const override {
    std::vector<SolverRecord> ignored;
    return schedule_with_record(m, ignored);
  }
  // The inner search's records stand: compression changes no recompute.
  Schedule schedule_with_record(const Model& m, std::vector<SolverRecord>& records) const override {
    Schedule s = with_compression(m, inner_->schedule_with_record(m, records), packing_);
    s.strategy = name_;
    return s;
  }
  // Which tensors qualify is known only from the inner schedule: at most
  // four instructions per op on top of it.
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    ScheduleSize s = inner_->size(m, limit);
    if (s.bound == ScheduleSize::Bound::AtLeast) return s;
    s.instructions += 4 * static_cast<uint64_t>(m.size());
    s.bound = ScheduleSize::Bound::AtMost;
    return s;
  }

 private:
  std::unique_ptr<Strategy> inner_;
  Packing packing_;
  std::string name_;
};

}  // namespace

Schedule with_compression(const Model& model, Schedule inner, Packing p) {
  const auto& code = inner.code;
  const auto n = static_cast<std::size_t>(model.size());
  std::size_t first_bwd = kNone;
  for (std::size_t i = 0; i < code.size() && first_bwd == kNone; ++i)
    if (code[i].kind == InstrKind::Bwd) first_bwd = i;
  auto unchanged = [&] {
    const std::string why = "compress:" + std::string(packing_name(p)) +
                            ": no checkpoint waits for a recompute in this schedule; nothing is compressed";
    inner.note = inner.note.empty() ? why : inner.note + "; " + why;
    return std::move(inner);
  };
  if (first_bwd == kNone) return unchanged();

  // A storage some view aliases stays: converting it would change what the view reads.
  std::vector<uint8_t> aliased(n, 0);
  for (int v = 0; v < model.size(); ++v)
    if (model.storage(v) != v) aliased[static_cast<std::size_t>(model.storage(v))] = 1;

  // Before the backward: where each tensor was last read or computed. From
  // its start: its first read, whether a recompute made it, and its first
  // free or recompute (after which A(c) is another value).
  std::vector<std::size_t> forward_last(n, kNone), backward_read(n, kNone), backward_gone(n, kNone);
  std::vector<uint8_t> read_by_fwd(n, 0);
  ResidentSet at_backward(model);
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instr ins = code[i];
    const auto v = static_cast<std::size_t>(ins.op);
    if (i < first_bwd) {
      at_backward.apply(model, ins);
      if (ins.kind == InstrKind::Fwd) forward_last[v] = i;
    } else if ((ins.kind == InstrKind::FreeAct || ins.kind == InstrKind::Fwd) && backward_gone[v] == kNone) {
      backward_gone[v] = i;
    }
    if (const OpIds* reads = activation_reads(model, ins)) {
      for (int u : *reads) {
        const auto uu = static_cast<std::size_t>(u);
        if (i < first_bwd) {
          forward_last[uu] = i;
        } else if (backward_read[uu] == kNone) {
          backward_read[uu] = i;
          read_by_fwd[uu] = ins.kind == InstrKind::Fwd;
        }
      }
    }
  }

  // (insert before this index, instruction), in the order they go in.
  std::vector<std::pair<std::size_t, Instr>> inserts;
  for (std::size_t c = 0; c < n; ++c) {
    const Op& op = model.op(static_cast<int>(c));
    const bool kept = at_backward.act[c] || at_backward.host[c] == 1;
    if (!kept || aliased[c] || !compressible(op) || packed_bytes(op.bytes, p) >= op.bytes) continue;
    if (backward_read[c] == kNone || !read_by_fwd[c] || backward_gone[c] < backward_read[c]) continue;
    const int v = static_cast<int>(c);
    const std::size_t at = forward_last[c] == kNone ? 0 : forward_last[c] + 1;  // the input: at once
    inserts.push_back({at, {compress_kind(p), v}});
    inserts.push_back({at, {InstrKind::FreeAct, v}});
    inserts.push_back({backward_read[c], {InstrKind::Decompress, v}});
    inserts.push_back({backward_read[c], {InstrKind::FreePacked, v}});
  }
  if (inserts.empty()) return unchanged();
  // Pairs stay together and in op order at one index.
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  Schedule out;
  out.strategy = std::move(inner.strategy);
  out.note = std::move(inner.note);
  out.code.reserve(code.size() + inserts.size());
  std::size_t k = 0;
  for (std::size_t i = 0; i <= code.size(); ++i) {
    for (; k < inserts.size() && inserts[k].first == i; ++k) out.code.push_back(inserts[k].second);
    if (i < code.size()) out.code.push_back(code[i]);
  }
  return out;
}

std::unique_ptr<Strategy> make_compress(std::unique_ptr<Strategy> inner, Packing p, std::string spec) {
  return std::make_unique<Compress>(std::move(inner), p, std::move(spec));
}

}  // namespace remat
