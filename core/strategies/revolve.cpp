// Binomial checkpointing (Griewank & Walther, "Algorithm 799: Revolve").
//
// Textbook terms: states x_0..x_n, step i maps x_{i-1} to x_i; reversing step i
// needs x_{i-1} and runs the forward of step i fused with its adjoint. Here step
// i is op i of a chain (x_i = A(i)) and "reverse step i" is `fwd i; bwd i`. The
// forward advances (fwd instructions not fused with a bwd) number
// t(n, c) = r·n − β(c+1, r−1) with β(c, r) = binom(c+r, c) and r the least
// integer with β(c, r) >= n: the minimum for c slots, x_0's included. The
// simulator then counts forward_steps = t + n and recompute_steps = t.
#include <algorithm>
#include <limits>

#include "core/errors.h"
#include "core/model.h"
#include "core/strategies/strategies.h"

namespace remat {
namespace {

constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 4;

// binom(c + r, c), saturating at kBig; beta(c, -1) = 0.
int64_t beta(int64_t c, int64_t r) {
  if (r < 0 || c < 0) return 0;
  long double b = 1;  // binom(c+r, r) = prod_{i=1..r} (c+i)/i, exact in the integer steps below
  int64_t v = 1;
  for (int64_t i = 1; i <= std::min(c, r); ++i) {
    const int64_t top = std::max(c, r) + i;
    b = b * static_cast<long double>(top) / static_cast<long double>(i);
    if (b > static_cast<long double>(kBig)) return kBig;
    v = static_cast<int64_t>(b + 0.5L);
    b = static_cast<long double>(v);
  }
  return v;
}

int64_t reps(int64_t n, int c) {
  int64_t r = 0;
  while (beta(c, r) < n) ++r;
  return r;
}

class Revolve final : public Strategy {
 public:
  explicit Revolve(int slots) : slots_(slots) {}
  std::string name() const override { return "revolve:" + std::to_string(slots_); }

  Schedule schedule(const Model& m) const override {
    check(m);
    const int64_t n = m.loss();
    const int64_t t = revolve_advances(n, slots_);
    if (t > 200'000'000)
      throw InputError("revolve:" + std::to_string(slots_) + " on " + std::to_string(n) + " steps needs " +
                       std::to_string(t) + " recomputations; give it more slots");
    std::vector<Instr> code;
    code.reserve(static_cast<std::size_t>(t + 2 * n));
    reverse(0, n, slots_, code);
    return with_frees(m, std::move(code), name());
  }

  // t advances and n fused steps: forward_steps = t + n (the header's formula).
  // Each forward step of an op with aux(v) adds its free; how many of the t
  // advances are of such ops is not counted, so with any the size is a bound.
  ScheduleSize size(const Model& m, uint64_t) const override {
    check(m);
    const int64_t n = m.loss();
    const auto fwd = static_cast<uint64_t>(revolve_advances(n, slots_) + n);
    bool aux = false;
    for (int v = 1; v < m.size() && !aux; ++v) aux = m.op(v).aux_bytes > 0;
    if (!aux) return {instructions_with_frees(m, fwd, 0)};
    return {instructions_with_frees(m, fwd, fwd), ScheduleSize::Bound::AtMost};
  }

 private:
  static void check(const Model& m) {
    if (!is_chain(m))
      throw InputError("revolve needs a chain (every op reading only the one before it); model '" + m.name +
                       "' branches: use auto or optimal:BYTES");
  }

  // Reverse steps s+1..e with x_s resident and c slots (x_s's included).
  static void reverse(int64_t s, int64_t e, int c, std::vector<Instr>& code) {
    while (e > s) {
      const int64_t l = e - s;
      if (l == 1) {
        fused(s + 1, code);
        return;
      }
      if (c == 1) {  // nothing more to keep: advance from x_s for every step
        for (int64_t j = e; j > s; --j) {
          for (int64_t v = s + 1; v < j; ++v) code.push_back({InstrKind::Fwd, static_cast<int32_t>(v)});
          fused(j, code);
        }
        return;
      }
      const int64_t m = split(l, c);
      for (int64_t v = s + 1; v <= s + m; ++v) code.push_back({InstrKind::Fwd, static_cast<int32_t>(v)});
      reverse(s + m, e, c - 1, code);  // x_{s+m} takes one slot
      e = s + m;                       // then the rest with x_s and all c slots
    }
  }

  static void fused(int64_t v, std::vector<Instr>& code) {
    code.push_back({InstrKind::Fwd, static_cast<int32_t>(v)});
    code.push_back({InstrKind::Bwd, static_cast<int32_t>(v)});
  }

  // Advances m before storing the next checkpoint such that
  // m + t(l-m, c-1) + t(m, c) = t(l, c): both parts on their optimal linear piece.
  static int64_t split(int64_t l, int c) {
    const int64_t r = reps(l, c);
    int64_t lo = std::max({int64_t{1}, beta(c, r - 2), l - beta(c - 1, r)});
    int64_t hi = std::min({l - 1, beta(c, r - 1), l - beta(c - 1, r - 1)});
    if (lo <= hi) return lo;
    const int64_t want = revolve_advances(l, c);  // fallback: search (never taken in tests)
    for (int64_t m = 1; m < l; ++m) {
      if (m + revolve_advances(l - m, c - 1) + revolve_advances(m, c) == want) return m;
    }
    return 1;
  }

  int slots_;
};

}  // namespace

int64_t revolve_advances(int64_t n, int c) {
  if (n <= 1) return 0;
  const int64_t r = reps(n, c);
  return r * n - beta(c + 1, r - 1);
}

bool is_chain(const Model& model) {
  for (int v = 1; v < model.size(); ++v) {
    const auto& in = model.op(v).inputs;
    if (in.size() != 1 || in[0] != v - 1) return false;
    if (model.consumers(v - 1).size() != 1) return false;
  }
  return true;
}

std::unique_ptr<Strategy> make_revolve(int slots) { return std::make_unique<Revolve>(slots); }

}  // namespace remat
