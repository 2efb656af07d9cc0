#include "core/strategies/block_solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/base/cancel_scope.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"
#include "core/strategies/checkpoint_sets.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

// A block alone: an Input shaped like the block's input (the cut before it),
// an identity view of it that the block reads (so that the cut has a
// gradient, as in the whole model: an Add reading the cut hands it its
// gradient's storage, which then lives to the end of the block's backward),
// copies of its ops with their costs and saved sets, and a Generic loss read
// by its last op. Its schedules' recompute FLOPs and the memory its tensors
// hold at the end of the forward pass are the block's own in the whole
// model: the cuts around it are kept, so no phase crosses them.
struct BlockAlone {
  Model model;
  int first = 0;                // the block's first op in the whole model (sub id 2)
  std::vector<int> decisions;   // sub ids of storages whose keeping is chosen
  std::vector<int> always;      // sub ids always kept (storages beyond kBlockDecisions, the block's output)
};

BlockAlone block_alone(const Model& m, const Block& b) {
  BlockAlone a;
  a.first = b.first;
  const int base = b.first - 1;
  const int shift = base - 1;  // the cut is sub id 1, the block's ops from 2
  a.model.name = m.name + " block " + std::to_string(b.first) + ".." + std::to_string(b.last);
  Op in;
  in.kind = OpKind::Input;
  in.name = "block input";
  in.dtype = m.op(base).dtype;
  in.shape = m.op(base).shape;
  a.model.add(std::move(in));
  Op cut;
  cut.kind = OpKind::Reshape;
  cut.name = "block input (its gradient)";
  cut.dtype = m.op(base).dtype;
  cut.shape = m.op(base).shape;
  cut.inputs = {0};
  a.model.add(std::move(cut));
  for (int v = b.first; v <= b.last; ++v) {
    Op o = m.op(v);
    for (auto& u : o.inputs) u -= shift;
    for (auto& u : o.saved) u -= shift;
    a.model.add(std::move(o), {}, true);
  }
  Op loss;
  loss.kind = OpKind::Generic;
  loss.name = "block end";
  loss.shape = {1};
  loss.inputs = {b.last - shift};
  a.model.add(std::move(loss), {}, true);
  a.model.finalize();
  // The storages inside the block (its output, a cut, is always kept).
  std::vector<int> owners;
  for (int v = 2; v < b.last - shift; ++v)
    if (!a.model.op(v).view) owners.push_back(v);
  // The largest are decided; the rest kept.
  std::stable_sort(owners.begin(), owners.end(), [&](int x, int y) {
    return a.model.op(x).bytes + a.model.op(x).aux_bytes > a.model.op(y).bytes + a.model.op(y).aux_bytes;
  });
  for (std::size_t i = 0; i < owners.size(); ++i)
    (i < static_cast<std::size_t>(kBlockDecisions) ? a.decisions : a.always).push_back(owners[i]);
  a.always.push_back(b.last - shift);
  return a;
}

// The block's checkpoints under an option (a mask over its decisions): the
// storages kept and every view of a kept storage, in sub ids, sorted.
std::vector<int> option_checkpoints(const BlockAlone& a, uint32_t mask) {
  const Model& s = a.model;
  std::vector<char> kept(static_cast<std::size_t>(s.size()), 0);
  kept[0] = 1;
  for (int v : a.always) kept[static_cast<std::size_t>(v)] = 1;
  for (std::size_t i = 0; i < a.decisions.size(); ++i)
    if (mask >> i & 1u) kept[static_cast<std::size_t>(a.decisions[i])] = 1;
  std::vector<int> out;
  for (int v = 1; v < s.loss(); ++v)
    if (kept[static_cast<std::size_t>(v)] || (s.op(v).view && kept[static_cast<std::size_t>(s.storage(v))])) out.push_back(v);
  return out;
}

// An option's costs, each against keeping everything in the block: the bytes
// it no longer holds once its forward pass is done (and until its backward),
// how much higher its forward and its backward peak (what its recomputation
// holds, less what it no longer keeps), and its recompute FLOPs.
struct Option {
  uint64_t saving = 0;
  int64_t fwd_extra = 0, bwd_extra = 0;
  double flops = 0;
  uint32_t mask = 0;
};

// Every option of the block, simulated alone; those no other matches or beats
// in all four costs, by increasing FLOPs (the first keeps all).
std::vector<Option> block_options(const BlockAlone& a, Clock::time_point deadline, int64_t& evaluated, bool& complete) {
  const Model& s = a.model;
  const uint32_t all = (1u << a.decisions.size()) - 1;
  struct Raw {
    uint64_t held, fwd, bwd;
    double flops;
    uint32_t mask;
  };
  std::vector<Raw> raw;
  for (uint32_t k = 0;; ++k) {
    const uint32_t mask = all - k;  // keep-all first: it is the reference
    if (k > 0 && (k % 64 == 0) && (Clock::now() >= deadline || cancel_requested())) {
      complete = false;
      break;
    }
    const Schedule sched = segment_schedule(s, option_checkpoints(a, mask), "block");
    const Simulation sim = simulate(s, sched);
    ++evaluated;
    Raw r{0, 0, 0, sim.recompute_flops, mask};
    // Forward: up to its loss (the next block's ops, in the whole model).
    // Backward: after the loss's backward step, recomputation included.
    int part = 0;  // 0 forward, 1 the loss, 2 backward
    for (std::size_t i = 0; i < sched.code.size(); ++i) {
      const Instr ins = sched.code[i];
      if (ins == Instr{InstrKind::Fwd, s.loss()}) r.held = sim.timeline[i], part = 1;
      if (part == 0) r.fwd = std::max(r.fwd, sim.timeline[i]);
      if (part == 2) r.bwd = std::max(r.bwd, sim.timeline[i]);
      if (ins == Instr{InstrKind::Bwd, s.loss()}) part = 2;
    }
    raw.push_back(r);
    if (mask == 0) break;
  }
  const Raw ref = raw.front();
  std::stable_sort(raw.begin(), raw.end(), [](const Raw& x, const Raw& y) { return x.flops < y.flops; });
  std::vector<Option> front;
  for (const Raw& r : raw) {
    Option o{ref.held > r.held ? ref.held - r.held : 0, static_cast<int64_t>(r.fwd) - static_cast<int64_t>(ref.fwd),
             static_cast<int64_t>(r.bwd) - static_cast<int64_t>(ref.bwd), r.flops, r.mask};
    const bool dominated = std::any_of(front.begin(), front.end(), [&](const Option& p) {
      return p.saving >= o.saving && p.fwd_extra <= o.fwd_extra && p.bwd_extra <= o.bwd_extra;
    });
    if (!dominated) front.push_back(o);
  }
  return front;
}

struct Candidate {
  bool fits = false;
  uint64_t peak = 0;
  double flops = 0;
  std::vector<int> checkpoints;
};

class Solver {
 public:
  Solver(const Model& m, uint64_t budget, Clock::time_point deadline, BlockSolution& out)
      : m_(m), budget_(budget), deadline_(deadline), out_(out) {}

  void run() {
    for (const Block& b : block_chain(m_)) {
      if (b.first == b.last) continue;
      blocks_.push_back(b);
    }
    out_.blocks = static_cast<int>(blocks_.size());
    // Keeping every tensor of every block: the reference the savings count from.
    const Candidate all_kept = evaluate(std::vector<std::size_t>(blocks_.size(), 0), /*use_options=*/false, true);
    if (all_kept.fits || blocks_.empty()) return;
    std::map<int, std::size_t> of_shape;
    try {
      for (const Block& b : blocks_) {
        if (of_shape.count(b.shape)) continue;
        of_shape[b.shape] = alone_.size();
        alone_.push_back(block_alone(m_, b));
        options_.push_back(cached_options(block_text(m_, b.first, b.last), alone_.back()));
        out_.options += static_cast<int>(options_.back().size());
      }
    } catch (const std::exception&) {
      // A block that cannot stand alone (an op whose rules need more than its
      // inputs' shapes): no set from the structure; the other solvers remain.
      out_.complete = false;
      return;
    }
    out_.shapes = static_cast<int>(alone_.size());

    for (const Block& b : blocks_) shape_of_.push_back(of_shape[b.shape]);

    // The DP's allowance starts at the budget; where the whole schedule
    // overruns it (what the per-block costs leave out), it is lowered by the
    // overrun and the DP solved again.
    uint64_t allowance = budget_;
    for (int round = 0; round < 32 && running(); ++round) {
      std::vector<std::size_t> choice;
      if (!choose(allowance, choice)) return;  // nothing fits the allowance
      const Candidate c = evaluate(choice, true);
      if (c.fits) break;
      const uint64_t over = c.peak - budget_;
      if (over >= allowance) return;
      allowance -= over;
    }
    if (out_.found) polish();
  }

 private:
  bool running() const { return Clock::now() < deadline_ && !cancel_requested(); }

  // A shape's options depend on the block alone, not on the budget: a sweep
  // over budgets (or the window asking again) enumerates each shape once.
  // Only complete enumerations are kept; at most 64 shapes.
  std::vector<Option> cached_options(const std::string& key, const BlockAlone& a) {
    static std::mutex mutex;
    static std::map<std::string, std::vector<Option>> cache;
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (const auto it = cache.find(key); it != cache.end()) return it->second;
    }
    bool complete = true;
    std::vector<Option> opts = block_options(a, deadline_, out_.evaluated, complete);
    if (!complete) {
      out_.complete = false;
      return opts;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() >= 64) cache.clear();
    cache.emplace(key, opts);
    return opts;
  }

  // Where each instruction of the keep-everything schedule is: a block's
  // forward or backward, or outside blocks after block k (k = -1: before the
  // first). Its peak there, the options' extras and the savings of the blocks
  // before it give every instruction's memory under any choice of options.
  void profile(const Schedule& sched, const Simulation& sim) {
    const std::size_t nb = blocks_.size();
    fwd_peak_.assign(nb, 0), bwd_peak_.assign(nb, 0), loose_peak_.assign(nb + 1, 0);
    std::vector<int> block_of(static_cast<std::size_t>(m_.size()), -1), after(static_cast<std::size_t>(m_.size()), -1);
    for (std::size_t b = 0, v = 1; v < static_cast<std::size_t>(m_.size()); ++v) {
      while (b < nb && static_cast<int>(v) > blocks_[b].last) ++b;
      if (b < nb && static_cast<int>(v) >= blocks_[b].first) block_of[v] = static_cast<int>(b);
      after[v] = static_cast<int>(b) - 1;  // the last block wholly before v
    }
    int where = -1;  // 2b: block b's forward, 2b + 1: its backward; -(k + 2): after block k
    for (std::size_t i = 0; i < sched.code.size(); ++i) {
      const Instr ins = sched.code[i];
      if (ins.kind == InstrKind::Fwd || ins.kind == InstrKind::Bwd) {
        const int b = block_of[static_cast<std::size_t>(ins.op)];
        where = b >= 0 ? 2 * b + (ins.kind == InstrKind::Bwd) : -(after[static_cast<std::size_t>(ins.op)] + 2);
      }
      const uint64_t t = sim.timeline[i];
      if (where >= 0) {
        auto& peak = where % 2 ? bwd_peak_[static_cast<std::size_t>(where / 2)] : fwd_peak_[static_cast<std::size_t>(where / 2)];
        peak = std::max(peak, t);
      } else {
        auto& peak = loose_peak_[static_cast<std::size_t>(-where - 1)];  // after block k: slot k + 1
        peak = std::max(peak, t);
      }
    }
  }

  // One option per block, along the chain: the least recompute FLOPs such
  // that every instruction's memory fits `allowance`. The state is the bytes
  // the blocks so far no longer hold (what the next carries in less than
  // under keep-everything), in units of 1/16384 of the most they can save
  // together, rounded down (a saving is never overstated). Exact for the
  // per-block costs; false when no choice fits.
  bool choose(uint64_t allowance, std::vector<std::size_t>& choice) {
    uint64_t most = 0;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      uint64_t m = 0;
      for (const Option& x : options_[shape_of_[b]]) m = std::max(m, x.saving);
      most += m;
    }
    const uint64_t unit = std::max<uint64_t>(1, (most + 16383) / 16384);
    const std::size_t J = static_cast<std::size_t>(most / unit) + 1;
    constexpr double inf = std::numeric_limits<double>::infinity();
    auto fits = [&](uint64_t peak, uint64_t saved, int64_t extra) {
      return static_cast<int64_t>(peak) - static_cast<int64_t>(saved) + extra <= static_cast<int64_t>(allowance);
    };
    if (loose_peak_[0] > allowance) return false;
    std::vector<double> cur(J + 1, inf), nxt(J + 1);
    cur[0] = 0;
    std::vector<std::vector<uint32_t>> pick(blocks_.size(), std::vector<uint32_t>(J + 1));
    std::vector<std::vector<uint32_t>> from(blocks_.size(), std::vector<uint32_t>(J + 1));
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      std::fill(nxt.begin(), nxt.end(), inf);
      const auto& opts = options_[shape_of_[b]];
      for (std::size_t j = 0; j <= J; ++j) {
        if (cur[j] == inf) continue;
        const uint64_t saved = j * unit;
        for (std::size_t o = 0; o < opts.size(); ++o) {
          const Option& x = opts[o];
          if (!fits(fwd_peak_[b], saved, x.fwd_extra) || !fits(bwd_peak_[b], saved, x.bwd_extra)) continue;
          const std::size_t k = std::min<std::size_t>(J, (saved + x.saving) / unit);
          if (!fits(loose_peak_[b + 1], k * unit, 0)) continue;
          const double f = cur[j] + x.flops;
          if (f < nxt[k]) nxt[k] = f, pick[b][k] = static_cast<uint32_t>(o), from[b][k] = static_cast<uint32_t>(j);
        }
      }
      std::swap(cur, nxt);
    }
    const auto best = std::min_element(cur.begin(), cur.end());
    if (*best == inf) return false;
    choice.assign(blocks_.size(), 0);
    for (std::size_t b = blocks_.size(), j = static_cast<std::size_t>(best - cur.begin()); b-- > 0;) {
      choice[b] = pick[b][j];
      j = from[b][j];
    }
    return true;
  }

  // The whole model's schedule for one option per block (option 0, keep
  // all, everywhere when !use_options), simulated; the best fitting one kept.
  Candidate evaluate(const std::vector<std::size_t>& choice, bool use_options, bool reference = false) {
    std::vector<char> inside(static_cast<std::size_t>(m_.size()), 0);
    for (const Block& b : blocks_)
      for (int v = b.first; v < b.last; ++v) inside[static_cast<std::size_t>(v)] = 1;
    Candidate c;
    for (int v = 1; v < m_.loss(); ++v)
      if (!inside[static_cast<std::size_t>(v)] || !use_options) c.checkpoints.push_back(v);
    if (use_options) {
      for (std::size_t b = 0; b < blocks_.size(); ++b) {
        const BlockAlone& a = alone_[shape_of_[b]];
        const uint32_t mask = options_[shape_of_[b]][choice[b]].mask;
        for (int v : option_checkpoints(a, mask))
          if (v >= 2 && v < blocks_[b].last - blocks_[b].first + 2) c.checkpoints.push_back(v - 2 + blocks_[b].first);
      }
      std::sort(c.checkpoints.begin(), c.checkpoints.end());
    }
    const Schedule sched = segment_schedule(m_, c.checkpoints, "optimal");
    const Simulation sim = simulate(m_, sched, {.timeline = reference});
    if (reference) profile(sched, sim);
    ++out_.evaluated;
    c.peak = sim.peak_bytes;
    c.flops = sim.recompute_flops;
    c.fits = c.peak <= budget_;
    if (c.fits && (!out_.found || c.flops < out_.recompute_flops)) take(c), best_choice_ = choice;
    return c;
  }

  void take(const Candidate& c) {
    out_.found = true;
    out_.checkpoints = c.checkpoints;
    out_.recompute_flops = c.flops;
    out_.peak = c.peak;
  }

  // From the best choice: each block, last to first, tries its options of
  // fewer FLOPs (cheapest first) and takes the first with which the whole
  // schedule still fits; until a pass changes nothing.
  void polish() {
    for (bool changed = true; changed && running();) {
      changed = false;
      for (std::size_t b = blocks_.size(); b-- > 0 && running();) {
        for (std::size_t o = 0; o < best_choice_[b] && running(); ++o) {
          if (options_[shape_of_[b]][o].flops >= options_[shape_of_[b]][best_choice_[b]].flops) break;
          std::vector<std::size_t> c = best_choice_;
          const double before = out_.recompute_flops;
          c[b] = o;
          evaluate(c, true);
          if (out_.recompute_flops < before) {
            changed = true;
            break;
          }
        }
      }
    }
  }

  const Model& m_;
  uint64_t budget_;
  Clock::time_point deadline_;
  BlockSolution& out_;
  std::vector<Block> blocks_;          // of more than one op
  std::vector<BlockAlone> alone_;      // per shape
  std::vector<std::vector<Option>> options_;  // per shape
  std::vector<std::size_t> shape_of_;  // per block
  std::vector<std::size_t> best_choice_;
  // Under keep-everything (profile): the peak of each block's forward and
  // backward instructions, and of those outside blocks after block k (slot k + 1).
  std::vector<uint64_t> fwd_peak_, bwd_peak_, loose_peak_;
};

}  // namespace

BlockSolution block_solve(const Model& m, uint64_t budget, double seconds) {
  const auto start = Clock::now();
  BlockSolution out;
  Solver(m, budget, start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)), out).run();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace remat
