// The CUDA backend's kernel entries (gpu/kernels on device buffers) and the
// state they read; the mirror of core/exec/cpu_ops.h. The table behind
// cuda_forward/cuda_backward is generated from REMAT_EXEC_KINDS.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/exec/gemm_path.h"
#include "core/exec/pointwise_path.h"
#include "core/exec/op_exec.h"

namespace remat::cuda {

struct CudaOpState {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::vector<float*> params, grads;  // per parameter tensor, device pointers
  ParamSlots param_slots;  // not "slots": Qt defines that word as a macro
  float* scratch[kScratchSlots] = {};  // kConvColumns stays null: ConvContext's workspace serves
  void* cudnn = nullptr;                // a cudnnHandle_t on `stream` when the build has cuDNN
  // The convolutions' workspace (cuDNN's, or im2col columns), held from the
  // backend's pool (MemoryUse::Workspace) at load(), sized for the largest Conv.
  void* conv_workspace = nullptr;
  size_t conv_workspace_bytes = 0;
  // cuBLAS's workspace (cublasSetWorkspace), lent between GEMMs to kernels that
  // need a little memory in stream order: the loss's and batch norm's partial sums.
  // Like stream, cublas and cudnn, made by create() and kept by drop_baseline().
  void* cublas_workspace = nullptr;
  size_t cublas_workspace_bytes = 0;
  const float* target = nullptr;
  const int32_t* labels = nullptr;
  uint64_t target_n = 0, labels_n = 0;
  float* loss = nullptr;  // one device float
  // Per op: its constant on the device (constant_bytes: values or mask), null when none.
  std::vector<const void*> consts;
  uint64_t seed = 0;
  // Mixed precision's products (core/exec/gemm_path.h): the path, from
  // REMAT_CUDA_GEMM at create(), and the 16-bit operands the mixed call sets
  // for the one kernel call where lowp_gemm holds (inactive otherwise).
  GemmMode gemm_mode = GemmMode::TensorCore;
  // The same for the convolutions (lowp_conv), from REMAT_CUDA_CONV; they
  // take it only where cuDNN runs (cudnn set), else the f32 path runs them.
  GemmMode conv_mode = GemmMode::TensorCore;
  // Per op of the loaded model: 1 where lowp_conv holds but cuDNN has no
  // deterministic 16-bit algorithm for it (load() says so once): it runs in f32.
  std::vector<uint8_t> conv_f32;
  LowpOperands lowp;
  uint64_t lowp_calls = 0;  // GEMM kernel calls that ran on 16-bit operands (the tests read it)
  uint64_t lowp_conv_calls = 0;  // the same for the convolutions
  // Mixed precision's memory-bound ops (core/exec/pointwise_path.h): the
  // path, from REMAT_CUDA_POINTWISE at create(), and the stored tensors the
  // mixed call sets for the one kernel call where lowp_io holds.
  PointwiseMode pointwise_mode = PointwiseMode::Direct;
  IoOperands io;
  uint64_t io_calls = 0;  // kernel calls that read and wrote the stored tensors (the tests read it)
  // remat run --nondeterministic-backward (Compute::allow_nondeterministic_backward):
  // cuDNN's backward-data and backward-filter take its first-ranked algorithm
  // whatever its determinism (ConvContext), the embedding gradient adds by
  // atomicAdd; no forward changes.
  bool nondeterministic_backward = false;

  const float* param(int v, int slot) const { return params[param_slots.index(v, slot)]; }
  float* param_grad(int v, int slot) const { return grads[param_slots.index(v, slot)]; }
  const void* constant(int v) const { return consts.at(static_cast<std::size_t>(v)); }
};

// Queue op c's forward / backward on s.stream; InputError for a kind CUDA cannot run.
void cuda_forward(CudaOpState& s, const OpCall& c);
void cuda_backward(CudaOpState& s, const OpCall& c);

}  // namespace remat::cuda
