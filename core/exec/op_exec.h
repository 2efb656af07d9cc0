// How an op kind executes, on any backend (the kinds: exec_kinds.h):
// - its parameter tensors (shapes, names, how the executor initialises them);
// - the scratch its backward needs, sized once per model at load();
// - OpCall: the checked view of one op's tensors that every kernel entry gets,
//   so no backend re-derives "which pointer is the input" or "is it resident".
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/exec/backend.h"
#include "core/kernels/cpu_kernels.h"
#include "core/model.h"

namespace remat {

// How the executor draws a parameter's initial values (make_host_data).
enum class ParamInit : uint8_t {
  FanIn,     // uniform in ±1/sqrt(fan_in), fan_in = the input's features
  NearOne,   // 1 + U(±0.1)  (LayerNorm gamma)
  NearZero,  // U(±0.1)      (LayerNorm beta)
};

struct ParamSpec {
  const char* name;  // "weight", "bias", "gamma", "beta"
  std::vector<int64_t> shape;
  ParamInit init;
};

// Scratch slots of the backward passes. Each is one buffer per backend, sized
// at load() to the largest need of any op of the model.
enum ScratchSlot : int {
  kPreActGrad = 0,  // Dense: the gradient of the pre-activation (rows, out)
  kDiscardedDx = 1, // the input gradient of an op whose input has none (the model input)
  kScratchSlots = 2,
};
using ScratchFloats = std::array<int64_t, kScratchSlots>;

// Parameter tensors of op v in slot order; empty for kinds without parameters
// and for kinds that cannot be executed.
std::vector<ParamSpec> op_params(const Model& model, int v);
// Floats each scratch slot needs for the backward of op v.
ScratchFloats op_scratch(const Model& model, int v);
// The most any op of the model needs, per slot.
ScratchFloats model_scratch(const Model& model);
// True when `kind` is in REMAT_EXEC_KINDS.
bool exec_kind_listed(OpKind kind);

// Where each op's parameter tensors are in a backend's per-tensor arrays
// (parameter_tensors order): both backends' kernel state holds one.
class ParamSlots {
 public:
  ParamSlots() = default;
  explicit ParamSlots(const Model& model);
  std::size_t index(int v, int slot) const {
    return static_cast<std::size_t>(first_[static_cast<std::size_t>(v)] + slot);
  }

 private:
  std::vector<int> first_;  // per op: index of its first parameter tensor, -1 when none
};

// The activation a kernel applies for an activation op or a Dense.
cpu::Act kernel_act(OpKind kind);
cpu::Act kernel_act(Activation a);

// "op 3 ('fc1')" for messages.
std::string op_label(const Model& model, int v);

// One op's tensors as the executor handed them over. Reads of activations are
// checked: a custom saved set that leaves a needed tensor out is the model's
// fault (InputError), never a read of freed memory.
class OpCall {
 public:
  OpCall(const Model& model, int v, const TensorTable& t, std::span<const uint8_t> accumulate = {})
      : model(model), v(v), op(model.op(v)), t_(t), acc_(accumulate) {}

  const Model& model;
  const int v;
  const Op& op;

  const Op& in_op(std::size_t k) const { return model.op(op.inputs.at(k)); }
  // A of input k (forward and backward), A(v) (backward, and the output's pointer).
  const float* in(std::size_t k) const { return need(op.inputs.at(k)); }
  const float* self() const { return need(v); }
  float* out() const { return static_cast<float*>(t_.act[static_cast<std::size_t>(v)]); }
  // G(v): nullptr for the loss (its gradient is the implicit 1).
  const float* dy() const { return static_cast<const float*>(t_.grad[static_cast<std::size_t>(v)]); }
  // G of input k, or nullptr when that input has no gradient tensor.
  float* dx(std::size_t k) const {
    return static_cast<float*>(t_.grad[static_cast<std::size_t>(op.inputs.at(k))]);
  }
  // Add into dx(k) (true) or overwrite it (false).
  bool acc(std::size_t k) const { return k < acc_.size() && acc_[k] != 0; }
  // aux(v), op.aux_bytes of private saved tensors (LayerNorm: mean, rstd per row).
  float* aux() const;

 private:
  const float* need(int u) const;
  const TensorTable& t_;
  std::span<const uint8_t> acc_;
};

// A backend's kernel table: fwd_<entry>/bwd_<entry> per listed kind, over the
// backend's own state type S. Generated in each backend from REMAT_EXEC_KINDS.
template <typename S>
struct KernelEntry {
  OpKind kind;
  void (*fwd)(S&, const OpCall&);
  void (*bwd)(S&, const OpCall&);
};

// The entry of `kind` in `table`; InputError "the <backend> backend cannot run
// a <kind> (op ...)" when it has none.
template <typename S, std::size_t N>
const KernelEntry<S>& kernel_for(const std::array<KernelEntry<S>, N>& table, const OpCall& c,
                                 const char* backend) {
  for (const auto& e : table)
    if (e.kind == c.op.kind) return e;
  throw InputError(op_label(c.model, c.v) + ": the " + backend + " backend cannot run a " +
                   std::string(kind_name(c.op.kind)));
}

}  // namespace remat
