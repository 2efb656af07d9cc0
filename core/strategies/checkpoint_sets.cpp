#include "core/strategies/checkpoint_sets.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/biconnected_components.hpp>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "core/model/model.h"
#include "core/base/prefault.h"

namespace remat {

bool is_chain(const Model& model) {
  for (int v = 1; v < model.size(); ++v) {
    const auto& in = model.op(v).inputs;
    if (in.size() != 1 || in[0] != v - 1) return false;
    if (model.consumers(v - 1).size() != 1) return false;
  }
  return true;
}

std::vector<int> every_k_boundaries(const Model& model, int k) {
  std::vector<int> c;
  for (int v = k; v < model.loss(); v += k) c.push_back(v);
  return c;
}

int sqrt_interval(const Model& model) {
  const int n = model.loss();  // ops after the input
  return std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
}

// articulation_points needs an undirected graph: the model's edges, copied.
std::vector<int> articulation_candidates(const Model& m) {
  using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Undirected g(static_cast<std::size_t>(m.size()));
  for (int v = 1; v < m.size(); ++v) {
    for (int u : m.op(v).inputs) boost::add_edge(static_cast<std::size_t>(u), static_cast<std::size_t>(v), g);
  }
  std::vector<std::size_t> points;
  boost::articulation_points(g, std::back_inserter(points));
  std::vector<int> out;
  for (std::size_t p : points) {
    const int v = static_cast<int>(p);
    if (v > 0 && v < m.loss()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> auto_checkpoints(const Model& m) {
  const int k = sqrt_interval(m);
  std::vector<int> picks;
  int last = 0;
  for (int v : articulation_candidates(m)) {
    if (v - last >= k) {
      picks.push_back(v);
      last = v;
    }
  }
  return picks;
}

namespace {

bool cheap(OpKind k) {
  switch (k) {
    case OpKind::ReLU: case OpKind::GELU: case OpKind::Tanh: case OpKind::LayerNorm:
    case OpKind::Add: case OpKind::Dropout:
      return true;
    default:  // Linear, Dense, losses, and Generic ops whose cost we do not trust
      return false;
  }
}

}  // namespace

// Without the branch points one segment's recompute would run back along
// every residual Add to the input.
std::vector<int> selective_checkpoints(const Model& m) {
  std::vector<int> keep;
  for (int v = 1; v < m.loss(); ++v) {
    if (!cheap(m.op(v).kind) || m.consumers(v).size() > 1) keep.push_back(v);
  }
  return keep;
}

namespace {

int phase_last(const Model& model, const std::vector<int>& phase_start, std::size_t p) {
  return p + 1 < phase_start.size() ? phase_start[p + 1] - 1 : model.size() - 1;
}

// Keeping a view keeps its storage: the aliases down to the owner are kept
// too (free), so a recompute never makes a second copy of a held storage.
void keep_view_storages(const Model& model, std::vector<char>& checkpoint) {
  for (int v = model.size(); v-- > 1;) {
    if (checkpoint[static_cast<std::size_t>(v)] && model.op(v).view)
      checkpoint[static_cast<std::size_t>(model.op(v).inputs[0])] = 1;
  }
}

// Forward steps and, among them, those of ops with aux(v) (each adds a free
// of aux: instructions_with_frees).
struct FwdCount {
  uint64_t fwd = 0, aux = 0;
};

FwdCount forward_pass(const Model& model) {
  FwdCount c{static_cast<uint64_t>(model.size() - 1), 0};
  for (int v = 1; v < model.size(); ++v) c.aux += model.op(v).aux_bytes > 0;
  return c;
}

// What each backward phase recomputes: every tensor its backward steps read
// that is neither a checkpoint nor already recomputed in this phase,
// recursively back to checkpoints, and every op whose aux(v) a backward step
// reads that is no checkpoint. The generator and the counter share it.
class PhaseWalk {
 public:
  PhaseWalk(const Model& model, const std::vector<char>& checkpoint)
      : model_(model), checkpoint_(checkpoint), stamp_(static_cast<std::size_t>(model.size()), -1) {}

  // Appends phase p's recomputations (ops first..last) to `needed`, unsorted.
  // Stops once `needed` holds more than `cap` (the caller only wants to know
  // that it is too many).
  void needed(int p, int first, int last, std::vector<int>& needed,
              std::size_t cap = std::numeric_limits<std::size_t>::max()) {
    auto available = [&](int t) {
      return checkpoint_[static_cast<std::size_t>(t)] || stamp_[static_cast<std::size_t>(t)] == p;
    };
    auto take = [&](int t) {
      stamp_[static_cast<std::size_t>(t)] = p;  // mark now; emitted in order by the caller
      needed.push_back(t);
      stack_.push_back(t);
    };
    stack_.clear();
    for (int v = first; v <= last; ++v) {
      for (int t : model_.op(v).saved)
        if (!available(t)) take(t);
      // aux(v) comes only from a fwd v: kept from the forward pass for a
      // checkpoint, otherwise made again by recomputing v in this phase.
      if (model_.op(v).aux_bytes > 0 && !available(v)) take(v);
    }
    while (!stack_.empty() && needed.size() <= cap) {  // iterative: recompute chains can be a million deep
      const int t = stack_.back();
      stack_.pop_back();
      for (int u : model_.op(t).inputs)
        if (!available(u)) take(u);
    }
  }

 private:
  const Model& model_;
  const std::vector<char>& checkpoint_;
  std::vector<int> stamp_;  // phase that last recomputed A(v)
  std::vector<int> stack_;
};

// Whether bwd v reads a tensor `recomputed(t)` says its phase recomputes: a
// saved tensor, or aux(v) (an op recomputed for its aux is in the set).
template <typename Recomputed>
bool reads_any(const Model& model, int v, Recomputed&& recomputed) {
  const Op& op = model.op(v);
  if (op.aux_bytes > 0 && recomputed(v)) return true;
  return std::any_of(op.saved.begin(), op.saved.end(), [&](int t) { return recomputed(t); });
}

// Sorts a phase's recomputations into topological (id) order. They are often a
// dense run of ids (a segment, recompute-all's prefix), where marking and
// scanning the range is linear; otherwise sort.
void topological_order(std::vector<int>& needed, std::vector<char>& mark) {
  if (needed.size() < 2) return;
  const auto [lo, hi] = std::minmax_element(needed.begin(), needed.end());
  const int a = *lo, b = *hi;
  const auto range = static_cast<std::size_t>(b - a) + 1;
  if (range > 4 * needed.size()) {
    std::sort(needed.begin(), needed.end());
    return;
  }
  for (int t : needed) mark[static_cast<std::size_t>(t)] = 1;
  std::size_t k = 0;
  for (int t = a; t <= b; ++t) {
    if (mark[static_cast<std::size_t>(t)]) {
      mark[static_cast<std::size_t>(t)] = 0;
      needed[k++] = t;
    }
  }
}

// A phase's recomputations on a sequential model (every op reads the one
// before it), found without a walk. A saved tensor t (t is v-1 or v for a
// reader v: op_rules allows only inputs and the op itself) that is no
// checkpoint makes the phase recompute the run (c, t] back to the last
// checkpoint c < t, and so does an op t with aux(t) read by its own
// backward; runs with the same c nest, runs with different c are
// disjoint. Reading t in increasing order, each run is closed by its largest
// t, and the runs come out in increasing order: the walk's set, sorted.
class ChainRuns {
 public:
  ChainRuns(const Model& model, const std::vector<char>& checkpoint)
      : model_(model),
        checkpoint_(checkpoint),
        last_checkpoint_(static_cast<std::size_t>(model.size())) {
    for (int t = 0, c = 0; t < model.size(); ++t) {
      if (checkpoint[static_cast<std::size_t>(t)]) c = t;
      last_checkpoint_[static_cast<std::size_t>(t)] = c;
      const bool aux = model.op(t).aux_bytes > 0;
      if (aux && aux_before_.empty()) {  // the first op with aux: none before it
        aux_before_.reserve(static_cast<std::size_t>(model.size()) + 1);
        aux_before_.assign(static_cast<std::size_t>(t) + 1, 0);
      }
      if (!aux_before_.empty()) aux_before_.push_back(aux_before_.back() + aux);
    }
  }

  // Calls run(a, b) for each run [a, b] of the phase over ops first..last.
  template <typename Run>
  void runs(int first, int last, Run&& run) const {
    int open = -1, top = -1;  // the open run's checkpoint and largest t
    auto see = [&](int t) {
      if (checkpoint_[static_cast<std::size_t>(t)]) return;
      const int c = last_checkpoint_[static_cast<std::size_t>(t)];
      if (c != open) {
        if (open >= 0) run(open + 1, top);
        open = c;
      }
      top = std::max(top, t);
    };
    for (int v = first; v <= last; ++v) {
      const auto& saved = model_.op(v).saved;
      if (std::find(saved.begin(), saved.end(), v - 1) != saved.end()) see(v - 1);
      if (std::find(saved.begin(), saved.end(), v) != saved.end() || model_.op(v).aux_bytes > 0) see(v);
    }
    if (open >= 0) run(open + 1, top);
  }

  // All phases' recomputations (the final phase makes none).
  FwdCount count(const std::vector<int>& phase_start) const {
    FwdCount total;
    for (std::size_t p = 0; p + 1 < phase_start.size(); ++p)
      runs(phase_start[p], phase_last(model_, phase_start, p), [&](int a, int b) {
        total.fwd += static_cast<uint64_t>(b - a + 1);
        if (!aux_before_.empty())
          total.aux += aux_before_[static_cast<std::size_t>(b) + 1] - aux_before_[static_cast<std::size_t>(a)];
      });
    return total;
  }

 private:
  const Model& model_;
  const std::vector<char>& checkpoint_;
  std::vector<int> last_checkpoint_;  // largest checkpoint <= t
  // Ops with aux among 0..t-1; empty when no op has aux (a chain's 10^6
  // ops would fill 4 MB of zeros, twice per strategy: its size, its schedule).
  std::vector<uint32_t> aux_before_;
};

}  // namespace

Schedule checkpoint_schedule(const Model& model, std::vector<char> checkpoint,
                             const std::vector<int>& phase_start, std::string strategy) {
  const int n = model.size();
  checkpoint.resize(static_cast<std::size_t>(n), 0);
  checkpoint[0] = 1;
  keep_view_storages(model, checkpoint);
  const bool sequential = model.is_sequential();
  const std::optional<ChainRuns> chain = sequential ? std::optional<ChainRuns>(std::in_place, model, checkpoint) : std::nullopt;
  // The compute program in one allocation: its exact length on a chain (cheap
  // to count), a guess elsewhere.
  const uint64_t recomputed = chain ? chain->count(phase_start).fwd : uint64_t(n);
  std::vector<Instr> code;
  reserve_prefaulted(code, static_cast<std::size_t>(2 * static_cast<uint64_t>(n - 1) + recomputed));
  for (int v = 1; v < n; ++v) code.push_back({InstrKind::Fwd, v});

  std::optional<PhaseWalk> walk;
  if (!chain) walk.emplace(model, checkpoint);
  std::vector<int> needed;
  std::vector<std::pair<int, int>> runs;
  std::vector<char> mark(chain ? 0 : static_cast<std::size_t>(n), 0);
  for (int p = static_cast<int>(phase_start.size()) - 1; p >= 0; --p) {
    const int first = phase_start[static_cast<std::size_t>(p)];
    const int last = phase_last(model, phase_start, static_cast<std::size_t>(p));
    int v = last;
    if (p + 1 != static_cast<int>(phase_start.size())) {  // the final phase reads what the forward pass left
      // The phase's recomputations, sorted (runs of ids on a chain).
      needed.clear();
      runs.clear();
      if (chain) {
        chain->runs(first, last, [&](int a, int b) { runs.emplace_back(a, b); });
      } else {
        walk->needed(p, first, last, needed);
        topological_order(needed, mark);
      }
      auto recomputed = [&](int t) {
        if (!chain) return std::binary_search(needed.begin(), needed.end(), t);
        return std::any_of(runs.begin(), runs.end(), [t](const auto& r) { return r.first <= t && t <= r.second; });
      };
      // The backward steps at the phase's top that read nothing it recomputes
      // run first, as PyTorch's checkpointing recomputes a region only when
      // backward first unpacks one of its saved tensors: the tensors only
      // they read (a ReLU's kept output) are freed before the recomputation
      // (docs/memory-model.md, "When a phase recomputes").
      for (; v >= first && !reads_any(model, v, recomputed); --v) code.push_back({InstrKind::Bwd, v});
      if (chain) {
        for (const auto& [a, b] : runs)
          for (int t = a; t <= b; ++t) code.push_back({InstrKind::Fwd, t});
      } else {
        for (int t : needed) code.push_back({InstrKind::Fwd, t});
      }
    }
    for (; v >= first; --v) code.push_back({InstrKind::Bwd, v});
  }
  return with_frees(model, std::move(code), std::move(strategy));
}

ScheduleSize checkpoint_schedule_size(const Model& model, std::vector<char> checkpoint,
                                      const std::vector<int>& phase_start, uint64_t limit) {
  const int n = model.size();
  checkpoint.resize(static_cast<std::size_t>(n), 0);
  checkpoint[0] = 1;
  keep_view_storages(model, checkpoint);
  const FwdCount pass = forward_pass(model);
  auto total = [&](const FwdCount& re) { return instructions_with_frees(model, pass.fwd + re.fwd, pass.aux + re.aux); };
  if (model.is_sequential()) return {total(ChainRuns(model, checkpoint).count(phase_start))};
  // Any other DAG: walk the phases as the generator does, without emitting;
  // the walk costs what the recomputations number, so it stops past `limit`.
  PhaseWalk walk(model, checkpoint);
  std::vector<int> needed;
  FwdCount recomputed;
  for (int p = static_cast<int>(phase_start.size()) - 2; p >= 0; --p) {
    const uint64_t so_far = total(recomputed);
    const uint64_t room = limit > so_far ? (limit - so_far) / 2 : 0;  // each recomputation is a fwd and a free
    needed.clear();
    walk.needed(p, phase_start[static_cast<std::size_t>(p)], phase_last(model, phase_start, static_cast<std::size_t>(p)),
                needed, static_cast<std::size_t>(std::min<uint64_t>(room, std::numeric_limits<std::size_t>::max() - 1)));
    recomputed.fwd += needed.size();
    for (int t : needed) recomputed.aux += model.op(t).aux_bytes > 0;
    const uint64_t count = total(recomputed);
    if (count > limit) return {count, ScheduleSize::Bound::AtLeast};  // the phases left only add
  }
  return {total(recomputed)};
}

std::vector<int> cut_checkpoints(const Model& model, const std::vector<int>& boundaries) {
  // t crosses a cut when the first boundary at or after t comes before t's
  // last reader: one pass from the end finds each op's next boundary.
  const int n = model.size();
  std::vector<int> out;
  std::size_t b = boundaries.size();
  std::vector<int> next(static_cast<std::size_t>(n), n);
  for (int t = n; t-- > 0;) {
    while (b > 0 && boundaries[b - 1] >= t) --b;
    next[static_cast<std::size_t>(t)] = b < boundaries.size() ? boundaries[b] : n;
  }
  for (int t = 1; t < n; ++t) {
    int last_reader = -1;
    for (int r : model.consumers(t)) last_reader = std::max(last_reader, r);
    if (next[static_cast<std::size_t>(t)] < last_reader) out.push_back(t);
  }
  return out;
}

namespace {

// What the generator takes: the kept tensors and the phases' first ops.
struct Phases {
  std::vector<char> keep;
  std::vector<int> starts;
};

// Segments between checkpoints: phases start right after each checkpoint.
Phases segment_phases(const Model& model, const std::vector<int>& checkpoints) {
  const int n = model.size();
  Phases p{std::vector<char>(static_cast<std::size_t>(n), 0), {1}};
  for (int c : checkpoints) p.keep[static_cast<std::size_t>(c)] = 1;
  for (int v = 1; v < n - 1; ++v) {
    if (p.keep[static_cast<std::size_t>(v)]) p.starts.push_back(v + 1);
  }
  return p;
}

// Segments between boundaries, keeping what crosses each cut.
Phases cut_phases(const Model& model, const std::vector<int>& boundaries) {
  Phases p{std::vector<char>(static_cast<std::size_t>(model.size()), 0), {1}};
  for (int t : cut_checkpoints(model, boundaries)) p.keep[static_cast<std::size_t>(t)] = 1;
  for (int c : boundaries)
    if (c >= 1 && c < model.size() - 1) p.starts.push_back(c + 1);
  return p;
}

}  // namespace

Schedule cut_schedule(const Model& model, const std::vector<int>& boundaries, std::string strategy) {
  Phases p = cut_phases(model, boundaries);
  return checkpoint_schedule(model, std::move(p.keep), p.starts, std::move(strategy));
}

ScheduleSize cut_schedule_size(const Model& model, const std::vector<int>& boundaries, uint64_t limit) {
  Phases p = cut_phases(model, boundaries);
  return checkpoint_schedule_size(model, std::move(p.keep), p.starts, limit);
}

Schedule segment_schedule(const Model& model, const std::vector<int>& checkpoints, std::string strategy) {
  Phases p = segment_phases(model, checkpoints);
  return checkpoint_schedule(model, std::move(p.keep), p.starts, std::move(strategy));
}

ScheduleSize segment_schedule_size(const Model& model, const std::vector<int>& checkpoints, uint64_t limit) {
  Phases p = segment_phases(model, checkpoints);
  return checkpoint_schedule_size(model, std::move(p.keep), p.starts, limit);
}

ScheduleSize segment_schedule_bound(const Model& model) {
  const auto m = static_cast<uint64_t>(std::max(0, model.size() - 2));
  const uint64_t recomputed = model.is_sequential() ? m : (m / 2) * (m - m / 2);
  const FwdCount pass = forward_pass(model);
  const uint64_t fwd = pass.fwd + recomputed;
  // Every recomputation may be of an op with aux (when there are any).
  return {instructions_with_frees(model, fwd, pass.aux > 0 ? pass.aux + recomputed : 0), ScheduleSize::Bound::AtMost};
}

}  // namespace remat
