// Binomial checkpointing (Griewank & Walther, "Algorithm 799: Revolve"), in
// this project's memory model.
//
// Textbook terms: states x_0..x_n, step i maps x_{i-1} to x_i; reversing step i
// needs x_{i-1} and re-runs the forward of step i fused with its adjoint. Here
// the steps are the N-1 layers of a chain (op i, x_i = A(i)) and the loss N is
// handled with the last layer. A backward step here reads both A(i-1) and A(i),
// so A(i), read by `bwd i+1`, is still resident when `bwd i` comes: the fused
// forward is not re-run, A(i) is held instead. That costs one tensor while the
// advances to x_{i-1} run, exactly what `bwd i`'s second gradient costs, so
// with C slots the peak stays C + 4 tensors and the count drops to
//   forward_steps = t(N-1, C) + 2,
// t the textbook advances (r·n − β(C+1, r−1)), plus the first computations of
// A(N-1) and the loss. docs/strategies.md derives it; the tests check it is
// the least of any schedule within that peak (exhaustive search).
#include <algorithm>
#include <limits>

#include "core/base/errors.h"
#include "core/model/model.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/factories.h"
#include "core/strategies/revolve.h"

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

void fwd(int64_t v, std::vector<Instr>& code) { code.push_back({InstrKind::Fwd, static_cast<int32_t>(v)}); }

// Reverse step j with x_{j-1} in hand. x_j is held from bwd j+1 (which read
// it as its input), so only the last layer, never computed yet, runs its
// forward: then the loss's forward and backward.
void step(int64_t j, int64_t last, std::vector<Instr>& code) {
  if (j == last) {
    fwd(j, code);
    fwd(j + 1, code);
    code.push_back({InstrKind::Bwd, static_cast<int32_t>(j + 1)});
  }
  code.push_back({InstrKind::Bwd, static_cast<int32_t>(j)});
}

// Advances m before storing the next checkpoint such that
// m + t(l-m, c-1) + t(m, c) = t(l, c): both parts on their optimal linear piece.
int64_t split(int64_t l, int c) {
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

// Reverse steps s+1..e with x_s resident and c slots (x_s's included);
// `last` is the last layer, reversed first, together with the loss.
void reverse(int64_t s, int64_t e, int c, int64_t last, std::vector<Instr>& code) {
  while (e > s) {
    const int64_t l = e - s;
    if (l == 1) {
      step(s + 1, last, code);
      return;
    }
    if (c == 1) {  // nothing more to keep: advance from x_s for every step
      for (int64_t j = e; j > s; --j) {
        for (int64_t v = s + 1; v < j; ++v) fwd(v, code);
        step(j, last, code);
      }
      return;
    }
    const int64_t m = split(l, c);
    for (int64_t v = s + 1; v <= s + m; ++v) fwd(v, code);
    reverse(s + m, e, c - 1, last, code);  // x_{s+m} takes one slot
    e = s + m;                             // then the rest with x_s and all c slots
  }
}

class Revolve final : public Strategy {
 public:
  explicit Revolve(int slots) : slots_(slots) {}
  std::string name() const override { return "revolve:" + std::to_string(slots_); }

  Schedule schedule(const Model& m) const override {
    check(m);
    return with_frees(m, revolve_program(m.loss(), slots_), name());
  }

  // The program's forward steps are t(N-1, C) + 2 (the header's count; 1 when
  // the input goes straight into the loss). Each forward step of an op with
  // aux(v) adds its free; how many of the advances are of such ops is not
  // counted, so with any the size is an upper bound.
  ScheduleSize size(const Model& m, uint64_t) const override {
    const int64_t t = check(m);
    const auto fwd = static_cast<uint64_t>(m.loss() == 1 ? 1 : t + 2);
    bool aux = false;
    for (int v = 1; v < m.size() && !aux; ++v) aux = m.op(v).aux_bytes > 0;
    if (!aux) return {instructions_with_frees(m, fwd, 0)};
    return {instructions_with_frees(m, fwd, fwd), ScheduleSize::Bound::AtMost};
  }

 private:
  // Throws InputError where revolve does not apply; returns t(N-1, C).
  int64_t check(const Model& m) const {
    if (!is_chain(m))
      throw InputError("revolve needs a chain (every op reading only the one before it); model '" + m.name +
                       "' branches: use auto or optimal:BYTES");
    const int64_t t = revolve_advances(m.loss() - 1, slots_);
    if (t > 200'000'000)
      throw InputError("revolve:" + std::to_string(slots_) + " on " + std::to_string(m.loss()) + " steps needs " +
                       std::to_string(t) + " recomputations; give it more slots");
    return t;
  }

  int slots_;
};

}  // namespace

int64_t revolve_advances(int64_t n, int c) {
  if (n <= 1) return 0;
  const int64_t r = reps(n, c);
  return r * n - beta(c + 1, r - 1);
}

std::vector<Instr> revolve_program(int64_t loss, int slots) {
  std::vector<Instr> code;
  code.reserve(static_cast<std::size_t>(revolve_advances(loss - 1, slots) + 3 * loss));
  if (loss == 1) {  // the input straight into the loss
    code.push_back({InstrKind::Fwd, 1});
    code.push_back({InstrKind::Bwd, 1});
  } else {
    reverse(0, loss - 1, slots, loss - 1, code);
  }
  return code;
}

std::unique_ptr<Strategy> make_revolve(int slots) { return std::make_unique<Revolve>(slots); }

}  // namespace remat
