#include "core/analysis/step_memory.h"

#include <array>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/model/op_rules.h"

namespace remat {
namespace {

constexpr std::array<std::pair<std::string_view, Optimizer>, 4> kOptimizers{{
    {"sgd", Optimizer::SGD},
    {"momentum", Optimizer::Momentum},
    {"adam", Optimizer::Adam},
    {"adamw", Optimizer::AdamW},
}};

bool is_half(DType d) { return d == DType::F16 || d == DType::BF16; }

}  // namespace

std::string_view optimizer_name(Optimizer o) {
  for (const auto& [name, value] : kOptimizers)
    if (value == o) return name;
  return "?";
}

bool parse_optimizer(std::string_view s, Optimizer& out) {
  for (const auto& [name, value] : kOptimizers)
    if (name == s) {
      out = value;
      return true;
    }
  return false;
}

std::string optimizer_choices() {
  std::string s;
  for (const auto& [name, value] : kOptimizers) s += (s.empty() ? "" : "|") + std::string(name);
  return s;
}

Optimizer optimizer_flag(std::string_view s) {
  Optimizer o = Optimizer::SGD;
  if (!s.empty() && !parse_optimizer(s, o))
    throw InputError("--optimizer: unknown optimizer '" + std::string(s) + "' (expected " + optimizer_choices() + ")");
  return o;
}

int optimizer_buffers(Optimizer o) {
  switch (o) {
    case Optimizer::SGD: return 0;
    case Optimizer::Momentum: return 1;
    case Optimizer::Adam:
    case Optimizer::AdamW: return 2;
  }
  return 0;
}

StepMemory step_memory(const Model& model, Optimizer optimizer, uint64_t activation_peak) {
  StepMemory m;
  m.optimizer = optimizer;
  m.activations = activation_peak;
  const uint64_t fp32 = dtype_size(DType::F32);
  for (int v = 0; v < model.size(); ++v) {
    const Op& op = model.op(v);
    if (op.param_bytes == 0) continue;
    const uint64_t trained = op.param_bytes - buffer_bytes(op);
    const uint64_t elements = trained / dtype_size(op.dtype);
    m.parameters += op.param_bytes;  // buffers are held too
    m.parameter_grads += trained;
    if (is_half(op.dtype)) m.master_weights += elements * fp32;
    m.optimizer_state += elements * fp32 * static_cast<uint64_t>(optimizer_buffers(optimizer));
  }
  return m;
}

nlohmann::json step_baseline_json(const StepMemory& m) {
  return {{"optimizer", optimizer_name(m.optimizer)},
          {"parameters_bytes", m.parameters},
          {"master_weights_bytes", m.master_weights},
          {"parameter_grads_bytes", m.parameter_grads},
          {"optimizer_state_bytes", m.optimizer_state},
          {"baseline_bytes", m.baseline()}};
}

std::string dominant_part_note(const StepMemory& m) {
  const std::array<std::pair<const char*, uint64_t>, 4> parts{{
      {"optimizer state", m.optimizer_state},
      {"parameters", m.parameters + m.master_weights},
      {"parameter gradients", m.parameter_grads},
      {"activations", m.activations},
  }};
  std::size_t top = 0;
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].second > parts[top].second) top = i;
  if (m.total() == 0 || parts[top].first == std::string_view("activations")) return {};
  const long share = std::lround(100.0 * static_cast<double>(parts[top].second) / static_cast<double>(m.total()));
  return std::string(parts[top].first) + " is " + std::to_string(share) +
         "% of the step: checkpointing changes only the activations";
}

}  // namespace remat
