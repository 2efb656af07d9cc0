#include "core/strategies/offload.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/instr_reads.h"
#include "core/model.h"
#include "core/simulator.h"

namespace remat {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

class Offload final : public Strategy {
 public:
  Offload(std::unique_ptr<Strategy> inner, std::string name) : inner_(std::move(inner)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Schedule schedule(const Model& m) const override {
    Schedule s = with_offloads(m, inner_->schedule(m));
    s.strategy = name_;
    return s;
  }
  // Which tensors move is known only from the inner schedule: at most one
  // offload and one fetch per op on top of it.
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    ScheduleSize s = inner_->size(m, limit);
    if (s.bound == ScheduleSize::Bound::AtLeast) return s;
    s.instructions += 2 * static_cast<uint64_t>(m.size());
    s.bound = ScheduleSize::Bound::AtMost;
    return s;
  }

 private:
  std::unique_ptr<Strategy> inner_;
  std::string name_;
};

}  // namespace

Schedule with_offloads(const Model& model, Schedule inner) {
  const auto& code = inner.code;
  const auto n = static_cast<std::size_t>(model.size());
  std::size_t first_bwd = kNone, first_recompute = kNone;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (first_bwd == kNone && code[i].kind == InstrKind::Bwd) first_bwd = i;
    if (first_bwd != kNone && code[i].kind == InstrKind::Fwd) {
      first_recompute = i;
      break;
    }
  }
  if (first_recompute == kNone) return inner;  // nothing waits through a recompute

  // A storage some view aliases stays: moving it would move the view's bytes too.
  std::vector<uint8_t> aliased(n, 0);
  for (int v = 0; v < model.size(); ++v)
    if (model.storage(v) != v) aliased[static_cast<std::size_t>(model.storage(v))] = 1;

  // Before the backward: where each tensor was last read or computed. After
  // it starts: its first read and its first free.
  std::vector<std::size_t> forward_last(n, kNone), backward_read(n, kNone), backward_free(n, kNone);
  ResidentSet at_backward(model);
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instr ins = code[i];
    const auto v = static_cast<std::size_t>(ins.op);
    if (i < first_bwd) {
      at_backward.apply(model, ins);
      if (ins.kind == InstrKind::Fwd) forward_last[v] = i;
    } else if (ins.kind == InstrKind::FreeAct && backward_free[v] == kNone) {
      backward_free[v] = i;
    }
    if (const OpIds* reads = activation_reads(model, ins)) {
      for (int u : *reads) {
        const auto uu = static_cast<std::size_t>(u);
        if (i < first_bwd) forward_last[uu] = i;
        else if (backward_read[uu] == kNone) backward_read[uu] = i;
      }
    }
  }
  std::vector<int> moved;
  for (std::size_t c = 0; c < n; ++c) {
    const bool kept = at_backward.act[c] && !model.op(static_cast<int>(c)).view && !aliased[c];
    if (kept && backward_read[c] != kNone && backward_read[c] >= first_recompute && backward_read[c] < backward_free[c])
      moved.push_back(static_cast<int>(c));
  }
  std::sort(moved.begin(), moved.end(), [&](int a, int b) {
    return backward_read[static_cast<std::size_t>(a)] < backward_read[static_cast<std::size_t>(b)];
  });

  // (insert before this index, instruction); offloads before fetches at one index.
  std::vector<std::pair<std::size_t, Instr>> inserts;
  std::size_t fetch_at = first_bwd;
  for (int c : moved) {
    const auto cc = static_cast<std::size_t>(c);
    const std::size_t offload_at = forward_last[cc] == kNone ? 0 : forward_last[cc] + 1;  // the input: at once
    if (offload_at < fetch_at) {  // else it would come straight back
      inserts.push_back({offload_at, {InstrKind::Offload, c}});
      inserts.push_back({fetch_at, {InstrKind::Fetch, c}});
    }
    fetch_at = backward_read[cc];
  }
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second.kind == InstrKind::Offload && b.second.kind == InstrKind::Fetch;
  });
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

std::unique_ptr<Strategy> make_offload(std::unique_ptr<Strategy> inner, std::string name) {
  return std::make_unique<Offload>(std::move(inner), std::move(name));
}

}  // namespace remat
