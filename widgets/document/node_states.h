// What each node of the graph shows at step t, read from the schedule and the
// core's ResidentIndex (never re-derived from the strategy): forward nodes are
// not yet computed, live, being computed or recomputed, freed, on the host
// (offloaded: kept, not freed), being fetched back, or held only as its
// compressed copy C(v) (kept at a smaller size, not freed); checkpoints
// are ringed; backward nodes are pending, running or done; gradients live; and
// what the running instruction reads (core's tensors_read).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "core/sim/compression.h"
#include "core/sim/resident_index.h"
#include "core/sim/schedule.h"
#include "core/analysis/comparison.h"
#include "core/strategies/registry.h"

namespace remat {
struct Model;

// OnHost: A(v) was offloaded and waits on the host (from its `offload` until
// its `fetch`); Fetching: the `fetch` instruction itself, A(v) back on the
// device while the copy lands; after it the tensor is Live again.
// Compressed: C(v) is on the device and A(v) is not (from the `free A(v)`
// after its compress until its decompress makes A(v) again).
// Evicted: freed by the heuristic of a strategy that decides while the step
// runs (dtr) to make room (Schedule::evictions), and recomputed when it is
// read again. dtr's other frees are Freed, as the caption words them
// ("freeing", not "evicting"): a tensor nothing reads until a recomputation
// of something else needs it, A(v) freed to remake an evicted aux(v), and
// what its recompute-all fallback frees (Schedule::fallback_frees) when the
// heuristic finds nothing left to evict. Those may be recomputed later too,
// as a checkpointing schedule's freed tensors are: not chosen under memory
// pressure, they are not evictions.
enum class FwdState : uint8_t { NotComputed, Live, Computing, Recomputing, Freed, OnHost, Fetching, Compressed, Evicted };
enum class BwdState : uint8_t { Pending, Running, Done };

struct NodeStates {
  std::vector<FwdState> fwd;
  std::vector<BwdState> bwd;
  std::vector<uint8_t> checkpoint;  // kept from the first pass and read by a recompute
  std::vector<uint8_t> grad_live;   // G(v) resident
  std::vector<Packing> packing;     // C(v)'s type where fwd[v] is Compressed, else None
  bool has_running = false;         // false before a schedule's first step
  Instr running{InstrKind::Fwd, 0}; // the instruction at this step
  std::vector<TensorRef> reads;     // what it reads
};

// Per-schedule facts computed once: the first fwd and the bwd index of each op
// and the checkpoint set as the schedule uses it.
class ScheduleFacts {
 public:
  // `declared`: the strategy's own checkpoint set where it has one (sqrt,
  // every-k, manual: see declared_checkpoints), added to what the schedule shows.
  ScheduleFacts(const Model& model, const Schedule& schedule, const std::vector<int>& declared = {},
                std::optional<StrategySpec> spec = std::nullopt);
  // A simulated run's: its schedule, declared set and spec.
  ScheduleFacts(const Model& model, const StrategyRun& run);
  static constexpr std::size_t kNever = static_cast<std::size_t>(-1);
  std::size_t first_fwd(int op) const { return first_fwd_[static_cast<std::size_t>(op)]; }
  std::size_t bwd_at(int op) const { return bwd_[static_cast<std::size_t>(op)]; }
  // An op whose first-pass activation stays resident until a recompute reads it.
  bool is_checkpoint(int op) const { return checkpoint_[static_cast<std::size_t>(op)] != 0; }
  const std::vector<uint8_t>& checkpoints() const { return checkpoint_; }
  std::vector<int> checkpoint_list() const;
  // A(op) away on the host from instruction `offload` (its release) until
  // `fetch` (kNever: a schedule cut short), in program order.
  struct HostSpan {
    int op;
    std::size_t offload, fetch;
  };
  const std::vector<HostSpan>& host_spans() const { return host_; }
  // The type the schedule compresses A(op) to (None: never compressed); a
  // modifier picks one type per schedule.
  Packing packing(int op) const { return static_cast<Packing>(packing_[static_cast<std::size_t>(op)]); }
  // The schedule's strategy decides while the step runs (dtr); its
  // heuristic's frees are listed in Schedule::evictions.
  bool decides_live() const { return live_; }
  // The schedule's strategy, when it is a registered one.
  const std::optional<StrategySpec>& spec() const { return spec_; }
  // A(op), not resident at instruction t, went at an eviction of such a
  // strategy's heuristic (its last free at or before t is one) and is
  // recomputed after t: where the caption of that free says "evicting".
  bool evicted_at(int op, std::size_t t) const;

 private:
  std::optional<StrategySpec> spec_;
  bool live_ = false;
  // Per op, where a live-deciding schedule computes it and frees A(op), and
  // whether each free is an eviction.
  std::vector<std::vector<std::size_t>> fwd_at_, free_at_;
  std::vector<std::vector<uint8_t>> free_evicts_;
  std::vector<std::size_t> first_fwd_, bwd_;
  std::vector<HostSpan> host_;
  std::vector<uint8_t> checkpoint_;
  std::vector<uint8_t> packing_;
};

NodeStates node_states_at(const Model& model, const Schedule& schedule, const ResidentIndex& index,
                          const ScheduleFacts& facts, std::size_t t);

}  // namespace remat
