// dtr:BYTES[:HEURISTIC]. The policy keeps its own ResidentSet, the
// simulator's memory rule, so the bytes it budgets are the bytes simulate()
// reports. It decides per storage (an owner with its views): a storage is
// evicted or freed whole, so an owner is resident whenever any view of it is
// and a recomputed owner never meets a view of its previous value. aux(v),
// which only bwd v reads, is a candidate of its own: it lives on after A(v)
// is freed, and may go while A(v) stays; recomputing v frees what is left of
// both first (fwd v makes A(v) and aux(v) anew).
#include "core/strategies/dtr.h"

#include <algorithm>
#include <numeric>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/factories.h"

namespace remat {

const std::vector<std::string>& dtr_heuristic_names() {
  static const std::vector<std::string> names = {"h-dtr", "h-dtr-eq", "lru", "largest"};
  return names;
}

namespace {

std::vector<int> distinct(const auto& ids) {
  std::vector<int> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// make_room found nothing it may evict (see program_fwd).
struct NoRoom {};

class Player {
 public:
  Player(const Model& m, uint64_t budget, DtrHeuristic h, uint64_t max_instructions, const LiveRun* live)
      : m_(m), budget_(budget), h_(h), max_(max_instructions), live_(live), r_(m), n_(m.size()),
        in_(n_), held_(n_), uses_(n_, 0), locks_(n_, 0), bwd_done_(n_, 0), last_(n_, 0), aliases_(n_), parent_(n_), comp_cost_(n_, 0),
        evicted_(n_, 0), aux_locked_(n_, 0), scratch_(n_, 0), reads_(n_, 0), mark_(n_, 0) {
    for (int v = 0; v < n_; ++v) aliases_[m.storage(v)].push_back(v);
    for (int v = 1; v < n_; ++v) {
      in_[v] = distinct(m.op(v).inputs);
      held_[v] = distinct(m.op(v).saved);
      for (int u : in_[v]) ++uses_[u];
      for (int s : held_[v]) ++uses_[s];
    }
    std::iota(parent_.begin(), parent_.end(), 0);
    peak_ = r_.bytes;
    code_.reserve(3 * static_cast<std::size_t>(n_));  // a forward, a backward and a free per op, before recomputations
  }

  DtrPlay play() {
    for (int v = 1; v < n_ && !stopped(); ++v) program_fwd(v);
    for (int v = n_ - 1; v >= 1 && !stopped(); --v) program_bwd(v);
    if (!stopped()) {
      for (int v = 0; v < n_; ++v)  // what is left: the input, and outputs nobody read
        if (r_.act[v]) emit({InstrKind::FreeAct, v});
    }
    DtrPlay out;
    out.stopped = stopped();
    out.schedule.code = std::move(code_);
    out.schedule.evictions = std::move(evicted_at_);
    out.schedule.fallback_frees = std::move(fallback_at_);
    out.evictions = std::move(evictions_);
    out.peak = peak_;
    out.fallbacks = fallbacks_;
    return out;
  }

 private:
  bool stopped() const { return code_.size() > max_; }

  void emit(Instr ins) {
    if (ins.kind == InstrKind::FreeAct || ins.kind == InstrKind::FreeAux) {
      if (evicting_) evicted_at_.push_back(code_.size());
      else if (strict_) fallback_at_.push_back(code_.size());
    }
    code_.push_back(ins);
    r_.apply(m_, ins);
    peak_ = std::max(peak_, r_.bytes);
    if (live_) live_->run(ins);
  }
  // Held now: the allocator's count when running live, else the policy's own.
  uint64_t held() const { return live_ ? live_->live_bytes() : r_.bytes; }
  void touch(int v) { last_[m_.storage(v)] = code_.size(); }

  // ---- the program -----------------------------------------------------------
  //
  // Each program instruction is first prepared the DTR way (recompute what is
  // missing, evict by the heuristic). When that finds nothing left to evict
  // (the heuristic kept what a tighter order would not), the instruction is
  // prepared again as recompute-all prepares it: everything that can be made
  // again is freed and what the instruction reads is recomputed from the
  // input in topological order, each tensor freed after its last read. So a
  // budget at or above recompute-all's peak always finishes.

  void program_fwd(int v) {
    const std::vector<int>& in = in_[v];
    try {
      ensure_all(in);
      compute_one(v);
    } catch (const NoRoom&) {
      strict_prepare(in, -1);
      compute_one(v);
    }
    strict_ = false;
    for (int u : in) --locks_[u];
    for (int u : in) --uses_[u], free_if_dead(m_.storage(u));
    free_if_dead(m_.storage(v));  // an output nothing reads
  }

  void program_bwd(int v) {
    const Op& op = m_.op(v);
    const std::vector<int>& held = held_[v];
    const bool aux = op.aux_bytes > 0;
    const bool in_held = std::find(held.begin(), held.end(), v) != held.end();
    const uint64_t need = r_.grad_bytes_made_by(m_, v);  // an Add's inputs share G(v): none
    try {
      ensure_all(held);
      // aux(v) may have been evicted alone (it may go even while this bwd's
      // saved tensors are recomputed, as recompute-all makes it last): fwd v
      // makes it again, after A(v)'s storage is freed (no second copy).
      if (aux && !r_.aux[v]) {
        if (r_.act[v]) {
          if (in_held) --locks_[v];
          release(m_.storage(v));
        }
        aux_locked_[v] = 1;
        ensure_all({v});
        // A(v) came with it; unless bwd v reads it, it may go now.
        if (!in_held) --locks_[v], free_if_dead(m_.storage(v));
      }
      aux_locked_[v] = 1;  // aux(v) stays while room is made for the gradients
      make_room(need, Instr{InstrKind::Bwd, v});
    } catch (const NoRoom&) {
      std::vector<int> targets = held;
      if (aux && !in_held) targets.push_back(v);
      strict_prepare(targets, aux ? v : -1);
      if (aux && !in_held) {
        --locks_[v];
        if (evictable(m_.storage(v))) release(m_.storage(v));
      }
      aux_locked_[v] = 1;
      make_room(need, Instr{InstrKind::Bwd, v});
    }
    strict_ = false;
    emit({InstrKind::Bwd, v});
    bwd_done_[v] = 1;
    aux_locked_[v] = 0;
    for (int t : held) touch(t), --locks_[t];
    if (r_.grad[v]) emit({InstrKind::FreeGrad, v});
    if (r_.aux[v]) emit({InstrKind::FreeAux, v});
    for (int t : held) --uses_[t];
    for (int t : held) free_if_dead(m_.storage(t));
    free_if_dead(m_.storage(v));  // recomputed for its aux only
  }

  // Recompute-all's way to make `targets` resident (each locked once):
  // nothing held but the input, the gradients and what this closure reads
  // next. `aux_op` keeps the aux its fwd makes (the bwd being prepared).
  void strict_prepare(const std::vector<int>& targets, int aux_op) {
    strict_ = true;
    ++fallbacks_;
    std::fill(locks_.begin(), locks_.end(), 0);
    std::fill(aux_locked_.begin(), aux_locked_.end(), 0);
    for (int s = 1; s < n_; ++s)
      if (m_.storage(s) == s && r_.act[s]) release(s);
    for (int v = 1; v < n_; ++v)
      if (r_.aux[v]) emit({InstrKind::FreeAux, v});
    const std::vector<int> missing = missing_for(targets);
    std::vector<int32_t>& reads = reads_;
    for (int w : missing)
      for (int u : in_[w])
        if (reads[u]++ == 0) ++locks_[u];
    for (int t : targets) ++locks_[t];
    for (int w : missing) {
      compute_one(w);
      if (w != aux_op && r_.aux[w]) emit({InstrKind::FreeAux, w});
      for (int u : in_[w]) {
        if (--reads[u] > 0) continue;
        --locks_[u];
        if (u != 0 && evictable(m_.storage(u))) release(m_.storage(u));
      }
    }
  }

  // ---- residency -------------------------------------------------------------

  // Makes every A(t), t in `targets`, resident and locks each once (the
  // caller unlocks). What is missing is recomputed one op at a time, the
  // lowest id of the missing set first (its inputs are then resident): the
  // ops recomputed here stay locked while an op still missing reads them; the
  // resident tensors the set starts from are locked only while an op reads
  // them, so memory may evict one, which then joins the set (and, recomputed,
  // stays locked: each op is computed at most twice here). This holds what
  // recompute-all holds, where a depth-first recursion would hold one input
  // of every op on the path.
  void ensure_all(const std::vector<int>& targets) {
    for (int t : targets) ++locks_[t];
    std::vector<int> made;  // recomputed here and locked
    for (;;) {
      const std::vector<int> missing = missing_for(targets);
      // Unlock what no missing op reads any more.
      std::vector<uint8_t>& read = scratch_;
      for (int w : missing)
        for (int u : m_.op(w).inputs) read[u] = 1;
      for (auto it = made.begin(); it != made.end();) {
        if (read[*it]) {
          ++it;
          continue;
        }
        const int u = *it;
        it = made.erase(it);
        --locks_[u];
        free_if_dead(m_.storage(u));
      }
      for (int w : missing)
        for (int u : m_.op(w).inputs) read[u] = 0;
      if (missing.empty()) break;
      const int w = missing.front();
      const std::vector<int>& in = in_[w];
      for (int u : in) ++locks_[u];
      compute_one(w);
      for (int u : in) --locks_[u];
      ++locks_[w];
      made.push_back(w);
    }
    for (int t : targets) touch(t);
  }

  // The ops to recompute for `targets`, ascending: the non-resident ones and
  // their non-resident ancestors.
  std::vector<int> missing_for(const std::vector<int>& targets) {
    std::vector<int> missing;
    std::vector<int>& stack = stack_;
    ++epoch_;
    for (int t : targets)
      if (!r_.act[t]) stack.push_back(t);
    while (!stack.empty()) {
      const int w = stack.back();
      stack.pop_back();
      if (mark_[w] == epoch_) continue;
      mark_[w] = epoch_;
      if (w == 0) throw std::logic_error("dtr: the input is never evicted");
      missing.push_back(w);
      for (int u : m_.op(w).inputs)
        if (!r_.act[u]) stack.push_back(u);
    }
    std::sort(missing.begin(), missing.end());
    return missing;
  }

  // fwd v, its inputs resident: room made, aux(v) kept only if bwd v will read it.
  void compute_one(int v) {
    const Op& op = m_.op(v);
    const int s = m_.storage(v);
    if (r_.aux[v]) emit({InstrKind::FreeAux, v});  // made again by this fwd
    const uint64_t need = (r_.holders[s] == 0 ? m_.op(s).bytes : 0) + op.aux_bytes;
    make_room(need, Instr{InstrKind::Fwd, v});
    if (evicted_[s] && s == v) uncharge(s);
    emit({InstrKind::Fwd, v});
    touch(v);
    for (int u : op.inputs) touch(u);
    if (r_.aux[v] && bwd_done_[v]) emit({InstrKind::FreeAux, v});
  }

  // Frees storage s whole when none of its resident aliases will be read
  // again by the program (recomputations then make it afresh).
  void free_if_dead(int s) {
    if (s == 0 || !r_.act[s]) return;  // the input stays: recomputations start from it
    for (int a : aliases_[s])
      if (r_.act[a] && (uses_[a] > 0 || locks_[a] > 0)) return;
    release(s);
  }

  void release(int s) {
    for (int a : aliases_[s])
      if (r_.act[a]) emit({InstrKind::FreeAct, a});
  }

  bool evictable(int s) const {
    if (s == 0 || !r_.act[s]) return false;
    for (int a : aliases_[s])
      if (r_.act[a] && locks_[a] > 0) return false;
    return true;
  }
  // aux(v), which recomputing v remakes (after freeing A(v) if it is there).
  bool aux_evictable(int v) const { return r_.aux[v] && !aux_locked_[v]; }

  double cost(int s) const { return std::max(1.0, m_.op(s).fwd_flops); }

  // ---- h_DTR^eq's evicted neighbourhoods: a union-find that never splits (the paper's approximation)
  int find(int s) {
    while (parent_[s] != s) s = parent_[s] = parent_[parent_[s]];
    return s;
  }
  std::vector<int> neighbours(int s) const {
    std::vector<int> out;
    for (int u : m_.op(s).inputs) out.push_back(m_.storage(u));
    for (int a : aliases_[s])
      for (int c : m_.consumers(a)) out.push_back(m_.storage(c));
    return distinct(out);
  }
  double neighbourhood_cost(int s) {
    std::vector<int> roots;
    for (int t : neighbours(s))
      if (evicted_[t]) roots.push_back(find(t));
    double c = cost(s);
    for (int root : distinct(roots)) c += comp_cost_[root];
    return c;
  }
  void charge(int s) {
    evicted_[s] = 1;
    comp_cost_[find(s)] += cost(s);
    for (int t : neighbours(s))
      if (evicted_[t] && find(t) != find(s)) {
        const double sum = comp_cost_[find(t)] + comp_cost_[find(s)];
        parent_[find(t)] = find(s);
        comp_cost_[find(s)] = sum;
      }
  }
  void uncharge(int s) {
    evicted_[s] = 0;
    comp_cost_[find(s)] = std::max(0.0, comp_cost_[find(s)] - cost(s));
  }

  // Evicts until `need` more bytes fit under the budget. The candidates: a
  // storage (its aliases' A), or an aux(v) whose A(v) is gone.
  void make_room(uint64_t need, Instr what) {
    while (held() + need > budget_) {
      int best = -1;
      bool best_aux = false;
      double best_score = 0;
      auto consider = [&](int v, bool aux, double c, double bytes) {
        const double stale = static_cast<double>(code_.size() - last_[m_.storage(v)] + 1);
        double score = 0;
        switch (h_) {
          case DtrHeuristic::HDtr:
          case DtrHeuristic::HDtrEq: score = c / (bytes * stale); break;
          case DtrHeuristic::Lru: score = -stale; break;
          case DtrHeuristic::Largest: score = -bytes; break;
        }
        if (best < 0 || score < best_score) best = v, best_aux = aux, best_score = score;
      };
      for (int v = 1; v < n_; ++v) {
        if (m_.storage(v) == v && evictable(v))
          consider(v, false, h_ == DtrHeuristic::HDtrEq ? neighbourhood_cost(v) : cost(v),
                   static_cast<double>(m_.op(v).bytes));
        if (aux_evictable(v)) consider(v, true, cost(v), static_cast<double>(m_.op(v).aux_bytes));
      }
      if (best < 0) {
        if (!strict_) throw NoRoom{};
        const uint64_t grads = r_.grad_bytes_resident(m_);
        throw InputError("dtr: a budget of " + std::to_string(budget_) + " bytes is below what " + to_string(what, m_) +
                         " needs: " + std::to_string(held() + need) + " bytes (" + std::to_string(need) +
                         " it makes, " + std::to_string(grads) + " of gradients, " +
                         std::to_string(held() - grads) +
                         " of activations it or the recomputation before it reads, the input's included; none can be "
                         "evicted)");
      }
      evictions_.push_back({code_.size(), best, best_aux, cost(best),
                            best_aux ? m_.op(best).aux_bytes : m_.op(best).bytes,
                            code_.size() - last_[m_.storage(best)]});
      evicting_ = true;
      if (best_aux) {
        emit({InstrKind::FreeAux, best});
      } else {
        if (h_ == DtrHeuristic::HDtrEq) charge(best);
        release(best);
      }
      evicting_ = false;
    }
  }

  const Model& m_;
  uint64_t budget_;
  DtrHeuristic h_;
  uint64_t max_;
  const LiveRun* live_;
  ResidentSet r_;
  int n_;
  std::vector<std::vector<int>> in_, held_;  // per op: its distinct inputs, its distinct saved tensors
  std::vector<int32_t> uses_;   // per alias: program reads still to come (aux's bwd included)
  std::vector<int32_t> locks_;  // per alias: instructions being prepared that read it
  std::vector<uint8_t> bwd_done_;
  std::vector<std::size_t> last_;  // per storage: the instruction count when last read or made
  std::vector<std::vector<int>> aliases_;  // per storage: its owner and views
  std::vector<int> parent_;
  std::vector<double> comp_cost_;
  std::vector<uint8_t> evicted_;
  std::vector<uint8_t> aux_locked_;  // per op: its bwd is being prepared
  std::vector<uint8_t> scratch_;  // per op, all 0 between uses
  std::vector<int32_t> reads_;    // per op, all 0 between uses
  bool strict_ = false;           // preparing recompute-all's way: no NoRoom, an InputError
  std::vector<uint32_t> mark_;    // per op: epoch_ once missing_for's walk saw it
  std::vector<int> stack_;        // missing_for's walk, empty between uses
  uint32_t epoch_ = 0;
  std::vector<Instr> code_;
  std::vector<DtrEviction> evictions_;
  bool evicting_ = false;  // make_room's frees
  // Instruction indices of the frees by cause (Schedule::evictions,
  // fallback_frees); the others free dead tensors, or A(v) to remake aux(v).
  std::vector<std::size_t> evicted_at_, fallback_at_;
  uint64_t peak_ = 0;
  std::size_t fallbacks_ = 0;
};

class Dtr final : public Strategy {
 public:
  Dtr(uint64_t budget, DtrHeuristic h) : budget_(budget), h_(h) {}
  std::string name() const override {
    return "dtr:" + std::to_string(budget_) +
           (h_ == DtrHeuristic::HDtr ? "" : ":" + dtr_heuristic_names()[static_cast<std::size_t>(h_)]);
  }
  Schedule schedule(const Model& m) const override {
    DtrPlay p = play_dtr(m, budget_, h_);
    p.schedule.strategy = name();
    return std::move(p.schedule);
  }
  // The policy decides as it goes, so its length is known by playing it
  // (fast: a scan of the resident storages per eviction).
  void play_live(const Model& m, const LiveRun& live) const override { play_dtr_live(m, budget_, h_, live); }
  ScheduleSize size(const Model& m, uint64_t limit) const override {
    const DtrPlay p = play_dtr(m, budget_, h_, limit);
    if (p.stopped) return {limit + 1, ScheduleSize::Bound::AtLeast};
    return {p.schedule.code.size(), ScheduleSize::Bound::Exact};
  }

 private:
  uint64_t budget_;
  DtrHeuristic h_;
};

}  // namespace

DtrPlay play_dtr(const Model& model, uint64_t budget, DtrHeuristic heuristic, uint64_t max_instructions) {
  if (model.size() < 2) throw InputError("dtr: model '" + model.name + "' has no op to run");
  Player p(model, budget, heuristic, max_instructions, nullptr);
  DtrPlay out = p.play();
  out.schedule.strategy = "dtr";
  return out;
}

DtrPlay play_dtr_live(const Model& model, uint64_t budget, DtrHeuristic heuristic, const LiveRun& live) {
  if (model.size() < 2) throw InputError("dtr: model '" + model.name + "' has no op to run");
  Player p(model, budget, heuristic, UINT64_MAX, &live);
  DtrPlay out = p.play();
  out.schedule.strategy = "dtr";
  return out;
}

std::unique_ptr<Strategy> make_dtr(uint64_t budget, DtrHeuristic heuristic) {
  return std::make_unique<Dtr>(budget, heuristic);
}

}  // namespace remat
