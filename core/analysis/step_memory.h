// The whole training step's memory: what checkpointing cannot change (weights,
// their gradients, the optimizer's state) beside the activations it can. A
// user reads this before choosing a strategy: when Adam's state is most of
// the step, no schedule of activations will make the model fit.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/model/model.h"

namespace remat {

enum class Optimizer : uint8_t { SGD, Momentum, Adam, AdamW };

std::string_view optimizer_name(Optimizer o);
bool parse_optimizer(std::string_view s, Optimizer& out);
// "sgd|momentum|adam|adamw", for help texts and messages.
std::string optimizer_choices();
// The value of an --optimizer flag: empty is sgd; an unknown name throws
// InputError naming the flag and the choices.
Optimizer optimizer_flag(std::string_view s);

// Buffers of one fp32 element per weight the optimizer keeps between steps, as
// torch.optim does: SGD none, SGD with momentum its momentum buffer, Adam and
// AdamW exp_avg and exp_avg_sq.
int optimizer_buffers(Optimizer o);

struct StepMemory {
  Optimizer optimizer = Optimizer::SGD;
  uint64_t parameters = 0;       // weights and buffers as the model stores them
  uint64_t master_weights = 0;   // fp32 copies of f16/bf16 weights (mixed precision)
  uint64_t parameter_grads = 0;  // one gradient per weight, in the weight's dtype
  uint64_t optimizer_state = 0;  // optimizer_buffers() fp32 elements per weight
  uint64_t activations = 0;      // a strategy's peak (activations and their gradients)

  uint64_t baseline() const { return parameters + master_weights + parameter_grads + optimizer_state; }
  uint64_t total() const { return baseline() + activations; }
};

// The breakdown for `model` trained with `optimizer`, with `activation_peak`
// (a Simulation's peak_bytes) as the activations. An op's trained weights are
// (param_bytes - buffer_bytes) / dtype_size(op.dtype) elements; an op in f16 or bf16 gets fp32
// master weights, the optimizer's buffers are fp32 whatever the weights' dtype.
StepMemory step_memory(const Model& model, Optimizer optimizer, uint64_t activation_peak);

// {optimizer, parameters_bytes, master_weights_bytes, parameter_grads_bytes,
// optimizer_state_bytes, baseline_bytes}: the parts no strategy changes.
nlohmann::json step_baseline_json(const StepMemory& m);

// The largest part of the step as "optimizer state is 62% of the step", for
// the note under a table; empty when activations are the largest part.
std::string dominant_part_note(const StepMemory& m);

}  // namespace remat
