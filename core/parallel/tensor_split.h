// Tensor (and sequence) parallelism on a model file's pipeline stage: one
// rank's ops and shapes, found from the graph by following which axis of each
// tensor is divided over the t ranks (docs/parallel.md, "Model files").
//
// In each repeated block a Linear reading a whole tensor is column-parallel
// (its output features divided by t: attention Q, K, V, fused or not, the
// MLP's up and gate), one reading a tensor divided along its features is
// row-parallel (its input features divided, the full output all-reduced in
// place: the attention's output projection, the MLP's down). Between them the
// division is followed op by op through views (reshapes to heads,
// transposes, the (b·heads) batches of a bmm), element-wise ops, rotary
// tables, softmaxes, attention: the ranks each compute their heads. Before
// the blocks the embedding is vocabulary-parallel (ceil(V/t) rows, its output
// whole) and every other op whole; after them the head's Linear is
// column-parallel over ceil(V/t) classes and the cross-entropy reads its share
// (vocabulary-parallel), as rank_model.h does for the presets. With sp the
// whole tensors in and between the blocks hold s/t of the sequence, with the
// presets' all-gather before each column-parallel Linear and reduce-scatter
// after each row-parallel one; the sequence is the axis before the features
// of the blocks' input ((b, s, h) or (rows, h)).
//
// What cannot be split is refused naming the op and why: t not dividing a
// Linear's features, the heads (a reshape that would cut across them) or the
// sequence; a divided tensor meeting an op that needs it whole (a norm over
// the divided features, a softmax along them, an unknown op); a block whose
// output is still divided or that has no column- and row-parallel Linear.
#pragma once
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/parallel/rank_model.h"
#include "core/strategies/repeated_blocks.h"

namespace remat {

// A stage model as block_stage_model writes it, and where its blocks lie.
struct StageLayout {
  struct Range {
    int first = 0, last = 0;  // the block's ops, inclusive, in the stage model
  };
  std::vector<Range> blocks;  // consecutive; the ops before the first are the embedding (or recv)
  int first_block = 0;        // the first block's number in the model (messages)
  bool first_stage = true, last_stage = true;
};

// The rank's model: `stage` with each op's shape (and its constants, its
// vocabulary, its slices' bounds) as rank 0 of t holds them, and sp's
// communication ops added. `label` names the model in messages. Throws
// InputError "--parallel tp=T on 'label': ..." naming the op that cannot be
// split and why.
Model split_tensor_parallel(const Model& stage, const StageLayout& layout, int tp, bool sp, const std::string& label);

// One rank's model of a model file: blocks [slice.first_block, + blocks) of
// `run` (repeated_block_run) as block_stage_model cuts them, split by
// slice.tp and slice.sp as above when tp > 1 or sp.
Model file_rank_model(const Model& model, const std::vector<Block>& run, const RankSlice& slice, const std::string& label);

}  // namespace remat
