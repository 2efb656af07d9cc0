// One rank's model under tensor, sequence and pipeline parallelism: the ops
// and shapes that rank computes for one micro-batch, so that the simulator and
// every strategy apply to it unchanged (docs/parallel.md).
#pragma once
#include <cstdint>
#include <string>

#include "core/model/model.h"

namespace remat {

// The fields of a gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]] or
// transformer:L[:D[:SEQ[:BATCH]]] spec, with the names of Korthikanti et al.
// 2022: L layers, h hidden, a heads, s sequence, b micro-batch.
struct StackShape {
  enum class Family { Gpt, Transformer };
  Family family = Family::Gpt;
  std::string spec;
  int layers = 0;
  int64_t hidden = 768, heads = 12, seq = 1024, batch = 1, vocab = 50257;
  DType dtype = DType::F32;
};
// Throws InputError naming the spec when it is neither a gpt: nor a
// transformer: preset (a model file's ranks are tensor_split.h's) or a field is bad.
StackShape parse_stack_shape(const std::string& spec);

// What one rank holds: `blocks` consecutive blocks from `first_block`, the
// embedding when it is the first pipeline stage, the final LayerNorm, the
// vocabulary projection and the loss when it is the last.
struct RankSlice {
  int tp = 1;          // tensor-parallel degree t: heads, QKV, MLP and vocabulary divided by t
  bool sp = false;     // sequence parallelism: LayerNorm and dropout regions hold s/t of the sequence
  int first_block = 0;
  int blocks = 0;
  bool first_stage = true;
  bool last_stage = true;
};

// The rank's model, the preset as core/model/preset_gpt.cpp (GPT-2) or
// presets.cpp (the teaching transformer, whose token mixer is two Linears
// around a tanh) writes it, with Megatron-LM's split (Shoeybi et al. 2019;
// Korthikanti et al. 2022):
//   - c_attn and mlp.c_fc are column-parallel (3h/t and 4h/t outputs), each
//     rank computes a/t heads; attn.c_proj and mlp.c_proj are row-parallel
//     (h/t inputs, full h outputs whose all-reduce is in place); the
//     transformer's mix.in and mlp.up likewise column-, mix.out and mlp.down
//     row-parallel;
//   - the embedding and lm_head are vocabulary-parallel (ceil(V/t) rows), the
//     transformer's head over its h classes likewise (h/t);
//   - with sp, each LayerNorm, dropout and residual holds [b, s/t, h]; an
//     all-gather (a Generic op that keeps its shard for the backward, which
//     gathers it again) feeds each column-parallel Linear, which then keeps
//     nothing of its own, and a reduce-scatter (a Generic op keeping nothing)
//     follows each row-parallel one;
//   - a stage that is not the first starts from the activation it receives
//     (its Input); one that is not the last ends in a one-element Generic op
//     standing for the send, whose backward is the gradient received; the
//     transformer's first stage under sp is given its shard of the input.
// With tp = 1, no sp and the whole stack it is make_preset(spec) op for op.
// Throws InputError naming what t does not divide.
Model rank_model(const StackShape& g, const RankSlice& r);

}  // namespace remat
