// The op kinds a backend can execute, one line each: X(Kind, entry). This list
// is the one description every execution table is generated from:
// - core/exec/op_exec.cpp: each kind's parameter tensors and backward scratch
//   (params_<entry>, scratch_<entry>);
// - each backend's kernel table (core/exec/cpu_kernel_table.cpp,
//   gpu/backend/cuda_kernel_table.cpp): fwd_<entry> and bwd_<entry>.
// Adding an executable kind is one line here, and the compiler then asks for
// its entry points in every backend. Kinds not listed are simulate-only.
// Kinds sharing an entry (the activations, the strided views) tell themselves
// apart by op.kind. A view's forward computes nothing (the executor points it
// into its input's storage); its backward maps G(view) back onto G(input).
#pragma once

#define REMAT_EXEC_KINDS(X) \
  X(Linear, linear)         \
  X(Dense, dense)           \
  X(ReLU, activation)       \
  X(Tanh, activation)       \
  X(GELU, activation)       \
  X(LayerNorm, layernorm)   \
  X(Add, add)               \
  X(Dropout, dropout)       \
  X(MSELoss, mse)           \
  X(SoftmaxCELoss, softmax_ce) \
  X(Sigmoid, activation)    \
  X(SiLU, activation)       \
  X(Conv, conv)             \
  X(BatchNorm, batchnorm)   \
  X(MaxPool, maxpool)       \
  X(AvgPool, avgpool)       \
  X(GlobalAvgPool, global_avgpool) \
  X(Softmax, softmax)       \
  X(Concat, concat)         \
  X(Reshape, reshape)       \
  X(Transpose, view)        \
  X(Slice, view)            \
  X(Expand, view)           \
  X(MatMul, matmul)         \
  X(MulConst, by_const)     \
  X(DivConst, by_const)     \
  X(AddConst, by_const)     \
  X(MaskedFill, masked_fill) \
  X(Embedding, embedding)   \
  X(Attention, attention)   \
  X(Pointwise, pointwise)   \
  X(Reduce, reduce)         \
  X(ConvTranspose, conv_transpose) \
  X(Upsample, upsample)     \
  X(GroupNorm, groupnorm)
