// Every persistent nested schedule of a small chain (nested_checkpoints.h's
// family), written out as programs, so the dynamic program can be checked
// against the simulator without sharing its memory arithmetic. The moves:
// reverse one op (recomputing its output first when its backward reads it
// and it is not held), a backward step that reads nothing missing, or advance
// from the segment's base to op c, store A(c) (held for bwd c or not), reverse
// [c, e], then [s, c].
#pragma once
#include <map>
#include <tuple>
#include <vector>

#include "core/model/model.h"
#include "core/sim/schedule.h"

namespace remat::test {

class PersistentFamily {
 public:
  explicit PersistentFamily(const Model& m) : m_(m) {}

  // All compute programs (fwd/bwd) of the family for the whole chain.
  const std::vector<std::vector<Instr>>& all() { return top(0); }

 private:
  using Programs = std::vector<std::vector<Instr>>;

  bool reads(int reader, int t) const {
    for (int s : m_.op(reader).saved)
      if (s == t) return true;
    return false;
  }

  static Programs concat(const std::vector<Instr>& head, const Programs& a, const Programs& b) {
    Programs out;
    for (const auto& x : a)
      for (const auto& y : b) {
        std::vector<Instr> p = head;
        p.insert(p.end(), x.begin(), x.end());
        p.insert(p.end(), y.begin(), y.end());
        out.push_back(std::move(p));
      }
    return out;
  }
  static std::vector<Instr> advance(int s, int c) {
    std::vector<Instr> p;
    for (int v = s + 1; v <= c; ++v) p.push_back({InstrKind::Fwd, v});
    return p;
  }

  const Programs& rev(int s, int e, bool held) {
    const auto key = std::make_tuple(s, e, held);
    if (auto it = rev_.find(key); it != rev_.end()) return it->second;
    Programs out;
    const bool self = reads(e, e);
    if (e == s + 1) {
      std::vector<Instr> p;
      if (self && !held) p.push_back({InstrKind::Fwd, e});
      p.push_back({InstrKind::Bwd, e});
      out.push_back(std::move(p));
    } else if (!reads(e, e - 1) && (!self || held)) {
      out = concat({{InstrKind::Bwd, e}}, {{}}, rev(s, e - 1, false));
    }
    for (int c = s + 1; c < e; ++c)
      for (bool h : {false, true}) {
        if (h && !reads(c, c)) continue;
        const Programs both = concat(advance(s, c), rev(c, e, held), rev(s, c, h));
        out.insert(out.end(), both.begin(), both.end());
      }
    return rev_[key] = std::move(out);
  }

  const Programs& top(int s) {
    if (auto it = top_.find(s); it != top_.end()) return it->second;
    Programs out;
    const int n = m_.loss();
    if (s == n - 1) {
      out.push_back({{InstrKind::Fwd, n}, {InstrKind::Bwd, n}});
    } else {
      for (int c = s + 1; c < n; ++c)
        for (bool h : {false, true}) {
          if (h && !reads(c, c)) continue;
          const Programs both = concat(advance(s, c), top(c), rev(s, c, h));
          out.insert(out.end(), both.begin(), both.end());
        }
    }
    return top_[s] = std::move(out);
  }

  const Model& m_;
  std::map<std::tuple<int, int, bool>, Programs> rev_;
  std::map<int, Programs> top_;
};

}  // namespace remat::test
