// Shared helpers of the executor tests.
#pragma once
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/exec/cpu_backend.h"
#include "core/exec/executor.h"
#include "core/exec/op_exec.h"
#include "core/io/json_model.h"
#include "core/model/presets.h"
#include "core/sim/simulator.h"
#include "core/strategies/registry.h"

namespace remat::testing {

// A model file with every op but the input and the loss in `dtype` ("bf16",
// "f16"; as if a capture had recorded them so): its ops on mixed precision's paths.
inline Model model_in(const std::string& path, const std::string& dtype) {
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in);
  for (auto& op : doc["ops"])
    if (op["kind"] != "Input" && op["kind"] != "SoftmaxCELoss") op["dtype"] = dtype;
  return model_from_json(doc, path + " (in " + dtype + ")");
}
inline Model model_in_bf16(const std::string& path) { return model_in(path, "bf16"); }

inline Schedule schedule_of(const Model& m, const std::string& spec) { return make_strategy(spec)->schedule(m); }

// What the CPU backend's allocator makes of `bytes` (host_allocator.h): 64-byte
// blocks when pooled, the bytes themselves (at least 1) when exact.
inline uint64_t cpu_block(uint64_t bytes, bool exact) {
  if (exact) return std::max<uint64_t>(bytes, 1);
  return std::max<uint64_t>(64, (bytes + 63) / 64 * 64);
}

// The model with every tensor at its allocated size, so that simulate() gives
// the allocator's view of the tracked tensors.
inline Model allocated_model(const Model& m, bool exact) {
  Model r = m;
  for (int v = 0; v < r.size(); ++v) {
    Op& op = r.mutable_op(v);
    if (!op.view) op.bytes = cpu_block(op.bytes, exact);  // a view allocates nothing
    if (op.aux_bytes) op.aux_bytes = cpu_block(op.aux_bytes, exact);
  }
  return r;
}

inline uint64_t rounded_tensor_peak(const Model& m, const Schedule& s, bool exact) {
  return simulate(allocated_model(m, exact), s).peak_bytes;
}

// The baseline and scratch buffers the CPU backend holds for `m`, as allocated.
inline uint64_t cpu_held_bytes(const Model& m, bool exact) {
  uint64_t held = 0;
  auto add = [&](uint64_t bytes) { held += bytes ? cpu_block(bytes, exact) : 0; };
  for (const ParamTensor& p : parameter_tensors(m)) {
    add(4 * static_cast<uint64_t>(p.numel()));  // values
    add(4 * static_cast<uint64_t>(p.numel()));  // gradients
  }
  const HostData d = make_host_data(m, 1);
  add(4 * d.target.size());
  add(4 * d.labels.size());
  add(4);  // the loss
  // Fixed constants: f32 values, or a mask of one byte per element.
  for (int v = 0; v < m.size(); ++v) {
    const Op& op = m.op(v);
    uint64_t n = 1;
    for (const int64_t d : op.attrs->const_shape) n *= static_cast<uint64_t>(d);
    if (op.kind == OpKind::MaskedFill) add(n);
    if ((op.kind == OpKind::MulConst || op.kind == OpKind::DivConst || op.kind == OpKind::AddConst) && !op.attrs->learned)
      add(4 * n);
  }
  for (const int64_t floats : model_scratch(m)) add(4 * static_cast<uint64_t>(floats));
  return held;
}

inline ExecOptions quick(uint64_t seed = 7) {
  ExecOptions o;
  o.seed = seed;
  o.repeat = 1;
  return o;
}

}  // namespace remat::testing
