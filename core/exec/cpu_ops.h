// The CPU backend's kernel entries (core/kernels on host buffers) and the
// state they read: parameters, their gradients, scratch, target/labels and the
// loss. The table behind cpu_forward/cpu_backward is generated from
// REMAT_EXEC_KINDS (exec_kinds.h): one fwd_/bwd_ pair per entry.
#pragma once
#include <cstdint>
#include <vector>

#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"
#include "core/exec/op_exec.h"

namespace remat {

struct CpuOpState {
  // Per parameter tensor (parameter_tensors order): values and gradients.
  std::vector<float*> params, grads;
  ParamSlots param_slots;  // not "slots": Qt defines that word as a macro
  float* scratch[kScratchSlots] = {};
  // Per op: its constant (constant_bytes: values or mask), held from load(); null when none.
  std::vector<const void*> consts;
  const float* target = nullptr;
  const int32_t* labels = nullptr;
  uint64_t target_n = 0, labels_n = 0;
  uint64_t seed = 0;
  float loss = 0;
  // F32 (the default): the CPU's own path. TensorCore: the CUDA backend's
  // 16-bit operand plumbing checked here (cpu_mixed.cpp; CpuBackend::set_gemm_mode).
  GemmMode gemm_mode = GemmMode::F32;
  GemmMode conv_mode = GemmMode::F32;  // the same for the convolutions (lowp_conv)
  LowpOperands lowp;
  uint64_t lowp_calls = 0;
  uint64_t lowp_conv_calls = 0;  // the convolutions' (lowp_conv) apart
  // F32 (the default): the CPU's own path. Direct: the CUDA backend's 16-bit
  // loads and stores (core/exec/pointwise_path.h) checked here
  // (cpu_mixed.cpp; CpuBackend::set_pointwise_mode).
  PointwiseMode pointwise_mode = PointwiseMode::F32;
  IoOperands io;
  uint64_t io_calls = 0;

  const float* param(int v, int slot) const { return params[param_slots.index(v, slot)]; }
  float* param_grad(int v, int slot) const { return grads[param_slots.index(v, slot)]; }
  const void* constant(int v) const { return consts.at(static_cast<std::size_t>(v)); }
};

// Throws InputError for a kind the CPU cannot run.
void cpu_forward(CpuOpState& s, const OpCall& c);
// A strided input of a kernel that reads rows, copied dense first
// (op_exec.h's dense_copy); the backend calls it before cpu_forward/backward.
void cpu_dense_input(CpuOpState& s, OpCall& c, bool backward);
void cpu_backward(CpuOpState& s, const OpCall& c);

}  // namespace remat
