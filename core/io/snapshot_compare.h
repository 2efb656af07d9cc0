// A PyTorch memory snapshot held against remat's prediction for the same
// model and strategy: the recorded active-memory curve laid over the
// predicted timeline, forward on forward and backward on backward, and the
// difference of the peaks explained where the snapshot tells (what was already
// allocated when recording began, parameter gradients and optimizer state,
// the allocator's rounding). Used by `remat compare-snapshot` and the window.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/comparison.h"
#include "core/io/torch_snapshot.h"

namespace remat {

struct SnapshotComparison {
  std::string strategy;
  std::vector<uint64_t> predicted;      // bytes per instruction (simulate()'s timeline)
  std::size_t predicted_backward = 0;   // first bwd instruction
  uint64_t predicted_peak = 0;
  std::size_t predicted_peak_index = 0;
  // The recorded curve above its starting level, at x in instruction units:
  // the forward part spread over [0, predicted_backward), the rest over
  // [predicted_backward, instructions].
  std::vector<double> measured_x;
  std::vector<uint64_t> measured;
  uint64_t measured_start = 0;          // active when recording began
  uint64_t measured_peak = 0;           // above measured_start
  double measured_peak_x = 0;
  int64_t difference = 0;               // measured_peak - predicted_peak
  std::vector<std::string> explanation; // one sentence each
};

SnapshotComparison compare_snapshot(const Model& model, const StrategyRun& run, const SnapshotCurve& curve);
nlohmann::json snapshot_comparison_json(const SnapshotComparison& c);
// Both curves in one SVG picture (width x height), the phases marked.
std::string snapshot_comparison_svg(const SnapshotComparison& c, const std::string& title, int width = 960, int height = 420);

}  // namespace remat
