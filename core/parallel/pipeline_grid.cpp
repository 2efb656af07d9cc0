#include "core/parallel/pipeline_grid.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/base/errors.h"

namespace remat {

char pass_letter(PassKind k) {
  switch (k) {
    case PassKind::Forward: return 'F';
    case PassKind::Backward: return 'B';
    case PassKind::WeightGrad: return 'W';
  }
  return '?';
}

std::vector<int> PipelineGrid::at(int device) const {
  std::vector<int> cells(static_cast<std::size_t>(length), -1);
  const auto& list = passes[static_cast<std::size_t>(device)];
  for (std::size_t i = 0; i < list.size(); ++i) cells[static_cast<std::size_t>(list[i].slot)] = static_cast<int>(i);
  return cells;
}

namespace {

PipelinePass pass(PassKind k, int mb, int chunk = 0) { return {.kind = k, .micro_batch = mb, .chunk = chunk, .slot = 0}; }

// Forwards first, then backwards in the forwards' order, a warm-up of `warm`
// forwards and then one of each by turns (GPipe is warm = M).
std::vector<PipelinePass> by_turns(int m, int warm) {
  std::vector<PipelinePass> out;
  int f = 0, b = 0;
  for (; f < std::min(warm, m); ++f) out.push_back(pass(PassKind::Forward, f));
  while (f < m) {
    out.push_back(pass(PassKind::Forward, f++));
    out.push_back(pass(PassKind::Backward, b++));
  }
  while (b < m) out.push_back(pass(PassKind::Backward, b++));
  return out;
}

// Zero-bubble: by turns, each B followed by the oldest W left, except the
// first `deferred` Ws, which wait for the end (where stage r of 1F1B idles r slots).
std::vector<PipelinePass> zero_bubble(int m, int warm, int deferred) {
  std::vector<PipelinePass> out;
  int f = 0, b = 0, w = 0, left = 0;
  for (; f < std::min(warm, m); ++f) out.push_back(pass(PassKind::Forward, f));
  while (b < m) {
    if (f < m) out.push_back(pass(PassKind::Forward, f++));
    out.push_back(pass(PassKind::Backward, b++));
    if (f < m && left < deferred) ++left;
    else out.push_back(pass(PassKind::WeightGrad, w++));
  }
  while (w < m) out.push_back(pass(PassKind::WeightGrad, w++));
  return out;
}

// Megatron-LM's interleaved order: the k-th forward (backward) of a device
// is micro-batch (k / pV) p + k mod p of chunk (k / p) mod V (of chunk
// V - 1 - (k / p) mod V).
std::vector<PipelinePass> interleaved(int p, int v, int m, int r) {
  const int total = m * v;
  auto at = [&](int k, bool forward) {
    const int group = k / (p * v), within = k % (p * v);
    const int chunk = forward ? within / p : v - 1 - within / p;
    return pass(forward ? PassKind::Forward : PassKind::Backward, group * p + within % p, chunk);
  };
  std::vector<PipelinePass> out;
  const int warm = std::min(2 * (p - r - 1) + (v - 1) * p, total);
  int f = 0, b = 0;
  for (; f < warm; ++f) out.push_back(at(f, true));
  while (f < total) {
    out.push_back(at(f++, true));
    out.push_back(at(b++, false));
  }
  while (b < total) out.push_back(at(b++, false));
  return out;
}

}  // namespace

std::vector<std::vector<PipelinePass>> pipeline_order(const ParallelSpec& p) {
  std::vector<std::vector<PipelinePass>> order;
  const int m = p.micro_batches;
  for (int r = 0; r < p.pp; ++r) {
    switch (p.schedule) {
      case PipelineSchedule::GPipe: order.push_back(by_turns(m, m)); break;
      case PipelineSchedule::OneFOneB: order.push_back(by_turns(m, p.pp - r - 1)); break;
      case PipelineSchedule::Interleaved: order.push_back(interleaved(p.pp, p.chunks, m, r)); break;
      case PipelineSchedule::ZbH1: order.push_back(zero_bubble(m, p.pp - r - 1, r)); break;
      case PipelineSchedule::ZbH2: order.push_back(zero_bubble(m, 2 * (p.pp - r - 1), r)); break;
    }
  }
  return order;
}

PipelineGrid pipeline_grid(const ParallelSpec& p) {
  const int64_t passes_per_device = int64_t{p.micro_batches} * p.chunks * 3;
  if (int64_t{p.pp} * passes_per_device > kMaxGridCells)
    throw InputError("--parallel: the per-stage timelines would hold " + std::to_string(int64_t{p.pp} * passes_per_device) +
                     " cells (pp x micro-batches x V x 3), over the limit of " + std::to_string(kMaxGridCells));
  PipelineGrid g;
  g.devices = p.pp;
  g.passes = pipeline_order(p);
  const int stages = p.pp * p.chunks, m = p.micro_batches;
  // The slot each pass of virtual stage v and micro-batch i ended in; -1: not yet.
  const std::size_t n = static_cast<std::size_t>(stages) * static_cast<std::size_t>(m);
  std::vector<int> f_done(n, -1), b_done(n, -1);
  auto idx = [&](int v, int i) { return static_cast<std::size_t>(v) * static_cast<std::size_t>(m) + static_cast<std::size_t>(i); };
  std::vector<std::size_t> next(static_cast<std::size_t>(p.pp), 0);
  std::size_t left = 0;
  for (const auto& d : g.passes) left += d.size();
  for (int t = 0; left > 0; ++t) {
    bool moved = false;
    for (int r = 0; r < p.pp; ++r) {
      auto& list = g.passes[static_cast<std::size_t>(r)];
      std::size_t& k = next[static_cast<std::size_t>(r)];
      if (k == list.size()) continue;
      PipelinePass& x = list[k];
      const int v = x.chunk * p.pp + r;  // Megatron: chunk j of device r is virtual stage j p + r
      auto done = [&](const std::vector<int>& d, int stage) {
        const int s = d[idx(stage, x.micro_batch)];
        return s >= 0 && s < t;
      };
      bool ready = false;
      switch (x.kind) {
        case PassKind::Forward: ready = v == 0 || done(f_done, v - 1); break;
        case PassKind::Backward: ready = done(f_done, v) && (v == stages - 1 || done(b_done, v + 1)); break;
        case PassKind::WeightGrad: ready = done(b_done, v); break;
      }
      if (!ready) continue;
      x.slot = t;
      if (x.kind == PassKind::Forward) f_done[idx(v, x.micro_batch)] = t;
      if (x.kind == PassKind::Backward) b_done[idx(v, x.micro_batch)] = t;
      ++k;
      --left;
      moved = true;
      g.length = t + 1;
    }
    // Nothing ran in this slot, so nothing can in the next: every order above
    // is one the papers run, and one that waits on itself is a bug here.
    if (!moved)
      throw std::logic_error("pipeline_grid: schedule " + schedule_name(p) + " does not progress at slot " + std::to_string(t));
  }
  return g;
}

}  // namespace remat
