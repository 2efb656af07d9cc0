// The structure real networks share, read from the graph alone (never from
// op names): the cuts (ops no tensor passes over), the blocks between them,
// which blocks repeat (a transformer block, a ResNet bottleneck), and the
// attention cores (scores, scale, mask, softmax, attention dropout). The
// attention-core and blocks strategies and the block solver
// (block_solver.h) are built on these.
#pragma once
#include <string>
#include <vector>

namespace remat {

struct Model;

// Ops c (0 < c < loss) such that no op after c reads any tensor made before
// c: cutting the model after c leaves A(c) as the only tensor crossing.
// Sorted.
std::vector<int> model_cuts(const Model& model);

// A block: the ops (first - 1, last], where first - 1 and last are cuts (the
// input counts as one), so the block's only input from outside is
// A(first - 1), its only output A(last).
struct Block {
  int first = 0, last = 0;
  // Blocks with the same shape id have the same ops in the same places
  // (kinds, shapes, dtypes, bytes, aux, FLOPs, inputs and saved tensors
  // relative to the block): their schedules' costs are the same.
  int shape = 0;
  bool repeated = false;  // part of a run of at least two equal blocks
};

// What the costs of the ops (first - 1, last] depend on, with ops named
// relative to first - 1 (kinds, dtypes, bytes, aux, FLOPs, inputs, saved
// tensors, shapes): equal texts, equal schedules' peaks and FLOPs.
std::string block_text(const Model& model, int first, int last);

// The model as a chain of blocks. The segments between consecutive cuts are
// grouped by their repeat: a run of a period of p segments repeated r >= 2
// times (a transformer layer: p = 2, its attention and its MLP each end at
// a residual sum) gives r blocks of p segments; every other segment is a
// block of its own. Covers the ops 1..loss - 1 in order (the loss is left out).
std::vector<Block> block_chain(const Model& model);

// Each attention's core, sorted by op: a MatMul of two activations (the
// scores), the element-wise ops between it and a Softmax (scale, mask,
// additive bias), the Softmax, and a Dropout after it, where the result is
// read by a MatMul (the product with the values). Each op read only by the
// next. The fused Attention op has none (nothing to recompute but itself).
std::vector<std::vector<int>> attention_cores(const Model& model);

// attention-core's checkpoints: every op 1..loss - 1 but the ops of the
// first `count` attention cores (all of them for count = 0): Korthikanti et
// al. 2022, Megatron-LM's selective recomputation. Every op when the model
// has none (attention_core_absent says so).
std::vector<int> attention_core_checkpoints(const Model& model, int count = 0);
// "" when the model has an attention core, else why attention-core keeps
// everything (for the schedule's note and the window's greyed row).
std::string attention_core_absent(const Model& model);

// blocks' checkpoints: every op but those inside a block of more than one op,
// whose input and output are kept, as torch.utils.checkpoint around every
// block does; with every = K > 1, only every K-th such block's output is
// kept (K blocks per checkpointed segment, as checkpoint_sequential). Every
// op when no block has more than one op (a chain: blocks_absent says so).
std::vector<int> block_input_checkpoints(const Model& model, int every = 1);
std::string blocks_absent(const Model& model);

}  // namespace remat
