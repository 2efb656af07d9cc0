// The one list of op kinds. Everything that enumerates kinds is generated from
// it: the OpKind enum and the kinds' names (op.h, op.cpp), the table of rules
// (op_rules.cpp), which kinds run (core/exec/exec_kinds.h: the parameter and
// scratch tables of op_exec.cpp and every backend's kernel table), and the
// kind list of the JSON Schema (resources/model.schema.json.in, filled in by
// CMake from this file). Adding a kind is one line here plus its code.
//
// One line per kind, in the enum's order (a kind's number is its place here):
//   SIM(Kind, rule, min_inputs, max_inputs)         simulated only
//   RUN(Kind, entry, rule, min_inputs, max_inputs)  simulated and executed
// rule: rule_<rule>(Derivation&) in op_rules.cpp, its shape, bytes, FLOPs and
//   what its backward saves (several kinds may share one rule).
// entry: params_<entry>/scratch_<entry> in op_exec.cpp and fwd_<entry>/
//   bwd_<entry> in each backend; the compiler asks every backend for them.
//   Kinds sharing an entry (the activations, the strided views) tell
//   themselves apart by op.kind.
// kMany: any number of inputs (op_rules.cpp defines it).
// The CMake regex that reads this list for the schema expects each line to
// start with "  SIM(" or "  RUN(" followed by the kind's name.
#pragma once

#define REMAT_OP_KINDS(SIM, RUN)                                         \
  SIM(Input, input, 0, 0)                                                \
  RUN(Linear, linear, linear, 1, 1)                                      \
  RUN(ReLU, activation, activation, 1, 1)                                \
  RUN(GELU, activation, activation, 1, 1)                                \
  RUN(Tanh, activation, activation, 1, 1)                                \
  RUN(LayerNorm, layernorm, layernorm, 1, 1)                             \
  RUN(Add, add, add, 2, 2)                                               \
  RUN(Dropout, dropout, dropout, 1, 1)                                   \
  RUN(MSELoss, mse, loss, 1, 1)                                          \
  RUN(SoftmaxCELoss, softmax_ce, loss, 1, 1)                             \
  /* Linear followed by an activation, fused (the teaching chain) */     \
  RUN(Dense, dense, linear, 1, 1)                                        \
  /* an imported op nobody can execute */                                \
  SIM(Generic, generic, 1, kMany)                                        \
  RUN(Conv, conv, conv, 1, 1)                                            \
  RUN(BatchNorm, batchnorm, batchnorm, 1, 1)                             \
  RUN(MaxPool, maxpool, pool, 1, 1)                                      \
  RUN(AvgPool, avgpool, pool, 1, 1)                                      \
  RUN(GlobalAvgPool, global_avgpool, global_pool, 1, 1)                  \
  /* product of two activations, batched (attention) */                  \
  RUN(MatMul, matmul, matmul, 2, 2)                                      \
  RUN(Softmax, softmax, softmax, 1, 1)                                   \
  RUN(Sigmoid, activation, activation, 1, 1)                             \
  RUN(SiLU, activation, activation, 1, 1)                                \
  /* by a constant (scalar or broadcast tensor) */                       \
  RUN(MulConst, by_const, const, 1, 1)                                   \
  RUN(DivConst, by_const, const, 1, 1)                                   \
  RUN(AddConst, by_const, const, 1, 1)                                   \
  /* Where(constant mask, constant, x) */                                \
  RUN(MaskedFill, masked_fill, const, 1, 1)                              \
  RUN(Concat, concat, concat, 1, kMany)                                  \
  /* Gather of rows of a table by integer ids */                         \
  RUN(Embedding, embedding, embedding, 1, 1)                             \
  /* Views: the output aliases input 0's storage (a Reshape that cannot  \
     be a view becomes a copy, as PyTorch's reshape does); a view's      \
     forward computes nothing, its backward maps G(view) onto G(input) */ \
  RUN(Reshape, reshape, reshape, 1, 1)                                   \
  RUN(Transpose, view, transpose, 1, 1)                                  \
  RUN(Slice, view, slice, 1, 1)                                          \
  RUN(Expand, view, expand, 1, 1)                                        \
  /* PyTorch's scaled_dot_product_attention as its CPU flash kernel runs \
     it: softmax(q·kᵀ·scale, causal or not)·v, keeping the rows'          \
     logsumexp for the backward */                                       \
  RUN(Attention, attention, attention, 3, 3)                             \
  /* unary and binary functions, where, casts (core/kernels/             \
     pointwise_fns.h: one line per function), broadcast as PyTorch does */ \
  RUN(Pointwise, pointwise, pointwise, 1, 3)                             \
  /* sum, mean or amax over axes, keepdim or not */                      \
  RUN(Reduce, reduce, reduce, 1, 1)                                      \
  /* the gradient of a Conv as an op (weight (C, channels/groups, k...)) */ \
  RUN(ConvTranspose, conv_transpose, conv_transpose, 1, 1)               \
  /* nearest or bilinear resizing of the spatial dimensions */           \
  RUN(Upsample, upsample, upsample, 1, 1)                                \
  RUN(GroupNorm, groupnorm, groupnorm, 1, 1)                             \
  /* the indices (i64) of the k largest along axis, largest first, as    \
     torch.topk; no gradient (its values are a Gather by them) */        \
  RUN(TopK, topk, topk, 1, 1)                                            \
  /* x's elements picked along axis by an integer index (torch.gather):  \
     inputs x, index */                                                  \
  RUN(Gather, gather, gather, 2, 2)                                      \
  /* binary cross-entropy on logits, averaged (BCEWithLogitsLoss: a      \
     multi-label head, a GAN's discriminator, a binary mask) */          \
  RUN(BCEWithLogitsLoss, bce_logits, loss, 1, 1)                         \
  /* padding of the last dimensions, constant (negative pads crop),      \
     reflect, replicate or circular, as F.pad */                         \
  RUN(Pad, pad, pad, 1, 1)                                               \
  /* the running sum along axis (torch.cumsum), summed in double in axis \
     order as PyTorch's CPU kernel; its backward the reversed running sum \
     of dy; keeps nothing */                                              \
  RUN(Cumsum, cumsum, cumsum, 1, 1)

// Expands to nothing: pass it for the half of the list a table skips.
#define REMAT_OP_KIND_SKIP(...)
