#include "core/exec/op_exec.h"

#include <algorithm>

#include "core/exec/exec_kinds.h"

namespace remat {
namespace {

// ---- Parameter tensors per entry ---------------------------------------------

std::vector<ParamSpec> linear_params(const Model& m, int v) {
  const Op& op = m.op(v);
  const int64_t in = m.op(op.inputs.at(0)).cols();
  return {{"weight", {op.cols(), in}, ParamInit::FanIn}, {"bias", {op.cols()}, ParamInit::FanIn}};
}
std::vector<ParamSpec> params_linear(const Model& m, int v) { return linear_params(m, v); }
std::vector<ParamSpec> params_dense(const Model& m, int v) { return linear_params(m, v); }
std::vector<ParamSpec> params_layernorm(const Model& m, int v) {
  const int64_t cols = m.op(v).cols();
  return {{"gamma", {cols}, ParamInit::NearOne}, {"beta", {cols}, ParamInit::NearZero}};
}
std::vector<ParamSpec> params_activation(const Model&, int) { return {}; }
std::vector<ParamSpec> params_add(const Model&, int) { return {}; }
std::vector<ParamSpec> params_dropout(const Model&, int) { return {}; }
std::vector<ParamSpec> params_mse(const Model&, int) { return {}; }
std::vector<ParamSpec> params_softmax_ce(const Model&, int) { return {}; }

// ---- Backward scratch per entry ---------------------------------------------
// A GEMM or a LayerNorm writes the input gradient whether or not anyone reads
// it; when the input has no gradient tensor (the model input) it goes to a
// buffer that is thrown away. Elementwise kinds simply skip that write.

int64_t discarded_dx(const Model& m, int v, int64_t floats) {
  return m.has_grad_tensor(m.op(v).inputs.at(0)) ? 0 : floats;
}

ScratchFloats scratch_linear(const Model& m, int v) {
  const Op& in = m.op(m.op(v).inputs.at(0));
  return {0, discarded_dx(m, v, in.numel())};
}
ScratchFloats scratch_dense(const Model& m, int v) {
  const Op& op = m.op(v);
  const int64_t pre = op.act == Activation::None ? 0 : m.op(op.inputs.at(0)).rows() * op.cols();
  return {pre, scratch_linear(m, v)[kDiscardedDx]};
}
ScratchFloats scratch_layernorm(const Model& m, int v) { return {0, discarded_dx(m, v, m.op(v).numel())}; }
ScratchFloats scratch_activation(const Model&, int) { return {}; }
ScratchFloats scratch_add(const Model&, int) { return {}; }
ScratchFloats scratch_dropout(const Model&, int) { return {}; }
ScratchFloats scratch_mse(const Model&, int) { return {}; }
ScratchFloats scratch_softmax_ce(const Model&, int) { return {}; }

struct ExecKind {
  OpKind kind;
  std::vector<ParamSpec> (*params)(const Model&, int);
  ScratchFloats (*scratch)(const Model&, int);
};

#define REMAT_EXEC_KIND_ROW(Kind, entry) ExecKind{OpKind::Kind, &params_##entry, &scratch_##entry},
constexpr ExecKind kExecKinds[] = {REMAT_EXEC_KINDS(REMAT_EXEC_KIND_ROW)};
#undef REMAT_EXEC_KIND_ROW

const ExecKind* find(OpKind kind) {
  for (const auto& k : kExecKinds)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace

ParamSlots::ParamSlots(const Model& model) : first_(static_cast<std::size_t>(model.size()), -1) {
  int k = 0;
  for (int v = 0; v < model.size(); ++v) {
    const auto count = static_cast<int>(op_params(model, v).size());
    if (count) first_[static_cast<std::size_t>(v)] = k;
    k += count;
  }
}

bool exec_kind_listed(OpKind kind) { return find(kind) != nullptr; }

std::vector<ParamSpec> op_params(const Model& model, int v) {
  const ExecKind* k = find(model.op(v).kind);
  return k ? k->params(model, v) : std::vector<ParamSpec>{};
}

ScratchFloats op_scratch(const Model& model, int v) {
  const ExecKind* k = find(model.op(v).kind);
  return k ? k->scratch(model, v) : ScratchFloats{};
}

ScratchFloats model_scratch(const Model& model) {
  ScratchFloats most{};
  for (int v = 1; v < model.size(); ++v) {
    const ScratchFloats s = op_scratch(model, v);
    for (int i = 0; i < kScratchSlots; ++i) most[i] = std::max(most[i], s[i]);
  }
  return most;
}

cpu::Act kernel_act(OpKind kind) {
  switch (kind) {
    case OpKind::ReLU: return cpu::Act::ReLU;
    case OpKind::Tanh: return cpu::Act::Tanh;
    case OpKind::GELU: return cpu::Act::GELU;
    default: break;
  }
  throw InternalError("kernel_act: " + std::string(kind_name(kind)) + " is not an activation");
}

cpu::Act kernel_act(Activation a) {
  switch (a) {
    case Activation::ReLU: return cpu::Act::ReLU;
    case Activation::Tanh: return cpu::Act::Tanh;
    case Activation::None: break;
  }
  return cpu::Act::None;
}

std::string op_label(const Model& m, int v) {
  const Op& op = m.op(v);
  return "op " + std::to_string(v) + (op.name.empty() ? "" : " ('" + op.name + "')");
}

const float* OpCall::need(int u) const {
  const void* p = t_.act[static_cast<std::size_t>(u)];
  if (!p)
    throw InputError(op_label(model, v) + ": " + std::string(kind_name(op.kind)) + " needs A(" + std::to_string(u) +
                     ") which is not resident (is it missing from the op's saved set?)");
  return static_cast<const float*>(p);
}

float* OpCall::aux() const {
  void* p = static_cast<std::size_t>(v) < t_.aux.size() ? t_.aux[static_cast<std::size_t>(v)] : nullptr;
  if (!p)
    throw InternalError(op_label(model, v) + ": " + std::string(kind_name(op.kind)) +
                        " reads aux(" + std::to_string(v) + ") which is not resident");
  return static_cast<float*>(p);
}

}  // namespace remat
