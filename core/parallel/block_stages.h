// Pipeline stages of a model file (captured from PyTorch, ONNX, JSON): its
// repeated blocks found from the graph alone (core/strategies/repeated_blocks.h,
// what the blocks strategy and the block solver use), consecutive blocks
// per stage, the ops before them (the embedding) on the first stage and the
// ops after them (the final norm, the head, the loss) on the last. Tensor and
// sequence parallelism split a stage further: tensor_split.h.
#pragma once
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {

// The model's longest run of equal consecutive blocks (block_chain's
// `repeated` blocks of one shape). Throws InputError naming the model when it
// has none: a model without repeated blocks has nothing to balance stages by.
std::vector<Block> repeated_block_run(const Model& model);

// Blocks [first, first + count) of `run` as one stage's model: it starts
// from the tensor the previous stage sends (an Input of A(first block's
// first - 1)'s shape and dtype), or from the model's input with the ops
// before the run when it is the first stage; it ends in a one-element send
// (a Generic op, as rank_model's), or with the ops after the run and the
// loss when it is the last.
Model block_stage_model(const Model& model, const std::vector<Block>& run, int first, int count, bool first_stage,
                        bool last_stage);

}  // namespace remat
