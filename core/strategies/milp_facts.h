// What the MILP over general schedules (milp_schedule.h) and its residency
// bound (residency_bound.h) need of a model's graph, computed once.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace remat {

struct Model;

// What the formulations need of the graph. Ops 0..L, L the loss; stage b
// (L >= b >= 1) is what runs between bwd b+1 and bwd b, bwd b included.
//
// Views own no bytes and keep their storage resident (docs/memory-model.md), so the
// decisions are per storage: R and S exist for the ops that own one, and a
// view is recomputed with its owner, in op order (it costs nothing, and its
// storage is resident exactly while any alias is). aux(v) follows with_frees:
// it lives from the last computation of v before bwd v until bwd v, and a
// computation that is not the last frees it at once.
struct MilpFacts {
  int L = 0;
  std::vector<int> own;                // the op owning A(v)'s storage (v unless a view)
  std::vector<uint64_t> a, aux;        // bytes a storage owns (0 for a view), aux(v)
  std::vector<double> f;               // forward FLOPs
  std::vector<std::vector<int>> in;    // per op: the distinct storages its fwd reads (a view: its own)
  std::vector<std::vector<int>> readers;  // per storage: the ops whose fwd reads it, views included, ascending
  std::vector<std::vector<int>> saved;    // per op: the distinct storages its bwd reads
  std::vector<int> last_read;          // per storage: the last op whose fwd reads it; -1: none
  std::vector<int> first_use;          // per storage: the first op (not one of its views) whose fwd or bwd reads it
  std::vector<uint64_t> grads, new_grads;  // G bytes resident before bwd b; allocated by bwd b

  explicit MilpFacts(const Model& m);
  bool owner(int v) const { return own[static_cast<std::size_t>(v)] == v; }
  bool saved_by(int b, int s) const { return contains(saved[static_cast<std::size_t>(b)], s); }
  // Whether storage s is worth a decision in stage b: read in stage b or
  // later (by an op w <= b, its recompute or backward), or its owner has aux
  // (recomputed for bwd s, A(s) dropped at once).
  bool useful(int b, int s) const {
    if (s > b || !owner(s)) return false;
    return first_use[static_cast<std::size_t>(s)] <= b || aux[static_cast<std::size_t>(s)] > 0;
  }
  static bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
  static bool add_once(std::vector<int>& v, int x) {
    if (contains(v, x)) return false;
    v.push_back(x);
    return true;
  }
};

}  // namespace remat
