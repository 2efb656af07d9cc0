// The structure-aware solver behind optimal:BYTES (the Rotor/Rockmate
// approach): a network is a chain of blocks between cuts, most of them
// repeats of a few shapes (repeated_blocks.h). Each shape's options are
// solved once, exactly, on the block alone: every choice of which of its
// tensors to keep from the forward pass (the rest recomputed in its backward
// phases) is scheduled and simulated, and the options no other beats in both
// memory kept and recompute FLOPs remain. Then one option per block is chosen
// along the chain by dynamic programming: the least recompute FLOPs whose
// memory kept at the end of the forward pass fits what the budget leaves;
// the whole schedule is simulated, and where its peak lies elsewhere (a
// block's backward) the DP's allowance is lowered by the overrun and solved
// again. The result is a checkpoint set (checkpoint_sets.h): the family it
// searches is the checkpoint sets whose blocks' inputs and outputs are kept.
#pragma once
#include <cstdint>
#include <vector>

namespace remat {

struct Model;

struct BlockSolution {
  bool found = false;  // a set within the budget
  std::vector<int> checkpoints;
  double recompute_flops = 0;
  uint64_t peak = 0;
  int blocks = 0;       // blocks of more than one op
  int shapes = 0;       // of those, distinct shapes (each solved once)
  int options = 0;      // options kept over all shapes (Pareto)
  int64_t evaluated = 0;  // schedules simulated (blocks alone and whole)
  bool complete = true;  // every shape's options enumerated in full (not cut short by the time limit)
  double seconds = 0;
};

// Above this many tensors a block's options are not all enumerated: the
// smallest beyond it are always kept (2^14 schedules of the block alone).
constexpr int kBlockDecisions = 14;

BlockSolution block_solve(const Model& model, uint64_t budget, double seconds);

}  // namespace remat
