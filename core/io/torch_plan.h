// A PyTorch plan: what a strategy's schedule asks PyTorch to keep and to
// recompute, per op of a model captured by remat_capture, named as the capture
// named it (module path, aten overload, its call and place), with the figures
// remat predicts. python/remat_capture's apply() reads it and wraps the user's
// module with torch.utils.checkpoint so that a training step keeps exactly
// the kept tensors (docs/pytorch.md#applying-a-plan-to-your-module).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/comparison.h"

namespace remat {

struct Model;

struct TorchPlanOp {
  bool keep = false;      // A(v) is resident when the forward pass ends (before the first backward step)
  bool keep_aux = false;  // aux(v) is, too
  int recomputes = 0;     // forward steps of v beyond the first
  // The backward phase that recomputes v (0 for the first group of
  // recomputations the backward pass runs, 1 for the next, ...); -1: never
  // recomputed. With "nested" plans, the first of them.
  int phase = -1;
  // What the schedule does with A(v) between the forward pass and its reads:
  // converts it ("bf16", "f16", "int8"; empty: never), moves it to the host.
  std::string compress;
  bool offload = false;
};

struct TorchPlan {
  std::string strategy;
  // "checkpoint-set": every op computed once in the forward pass and at most
  // once more; "nested": some op recomputed twice or more (revolve, budget);
  // "offload" or "compress": the schedule moves or converts checkpoints.
  std::string kind;
  std::vector<TorchPlanOp> ops;  // per op of the model
  int phases = 0;                // backward phases that recompute something
  // Predicted: activation bytes resident when the forward pass ends (what
  // PyTorch keeps for backward then: unique storages, aux included, the input
  // when kept), and the peak of the step (activations, aux and their gradients).
  uint64_t forward_end_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t store_all_peak_bytes = 0;
  int64_t recompute_steps = 0;
  double recompute_flops = 0;
  double overhead = 0;
};

// Throws InputError when the model was not captured from PyTorch (no
// torch_origin: presets, ONNX imports, hand-written files). `run` must be ok.
TorchPlan make_torch_plan(const Model& model, const StrategyRun& run);
// {"format": "remat-torch-plan", "version": 1, "model", "strategy", "kind",
//  "phases", "predicted": {...}, "ops": [{"id", "name", "kind", "module",
//  "aten", "call", "place", "inputs", "saved", "view", "bytes", "aux_bytes",
//  "keep", "keep_aux", "recomputes", "phase", "compress", "offload"}, ...]}
// (docs/pytorch.md); "compress" is null where the op is not converted.
nlohmann::ordered_json torch_plan_json(const Model& model, const TorchPlan& plan);
// Before any work: InputError unless `path` ends in .json and its folder exists.
void check_torch_plan_path(const std::string& path);
// Writes the plan whole or not at all.
void write_torch_plan(const Model& model, const TorchPlan& plan, const std::string& path);

}  // namespace remat
