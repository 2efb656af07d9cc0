// Helpers shared by the strategy tests: chains of unequal layers (no preset
// has them) and the checkpoint-set brute force the exact strategies are held to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/strategies/checkpoint_sets.h"
#include "core/model.h"
#include "core/simulator.h"

namespace remat::test {

// Appends an MSE loss reading `last` and finalizes the model.
inline void finish_with_mse_loss(Model& m, int last) {
  Op loss;
  loss.kind = OpKind::MSELoss;
  loss.name = "loss";
  loss.inputs = {last};
  m.add(loss);
  m.finalize();
}

// Input of width widths[0], Dense(tanh) layers of the following widths, MSE loss.
inline Model unequal_chain(const std::vector<int64_t>& widths, const std::string& name = "unequal") {
  Model m;
  m.name = name;
  Op in;
  in.kind = OpKind::Input;
  in.name = "x";
  in.shape = {1, widths[0]};
  int prev = m.add(in);
  for (std::size_t i = 1; i < widths.size(); ++i) {
    Op d;
    d.kind = OpKind::Dense;
    d.act = Activation::Tanh;
    d.name = "d" + std::to_string(i);
    d.inputs = {prev};
    d.shape = {1, widths[i]};
    prev = m.add(d);
  }
  finish_with_mse_loss(m, prev);
  return m;
}

// A chain of the given kinds (Dense, Linear, ReLU, Tanh, GELU, LayerNorm,
// Dropout) after an input of width widths[0]; Dense and Linear take the next
// width from `widths`, the others keep their input's. Their backward steps
// read their input, their output, both or neither.
inline Model mixed_chain(const std::vector<OpKind>& kinds, const std::vector<int64_t>& widths,
                         const std::string& name = "mixed") {
  Model m;
  m.name = name;
  Op in;
  in.kind = OpKind::Input;
  in.name = "x";
  in.shape = {1, widths[0]};
  int prev = m.add(in);
  std::size_t w = 1;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    Op op;
    op.kind = kinds[i];
    op.name = "v" + std::to_string(i + 1);
    op.inputs = {prev};
    if (op.kind == OpKind::Dense) op.act = Activation::Tanh;
    if (op.kind == OpKind::Dropout) op.dropout_p = 0.1f;
    if (op.kind == OpKind::Dense || op.kind == OpKind::Linear) op.shape = {1, widths[w++ % widths.size()]};
    prev = m.add(op);
  }
  finish_with_mse_loss(m, prev);
  return m;
}

struct SetResult {
  std::vector<int> checkpoints;
  Simulation sim;
};

// Every checkpoint set of ops 1..loss-1 through segment_schedule, simulated.
inline std::vector<SetResult> all_checkpoint_sets(const Model& m) {
  const int c = m.loss() - 1;
  std::vector<SetResult> out;
  for (uint32_t mask = 0; mask < (1u << c); ++mask) {
    SetResult r;
    for (int i = 0; i < c; ++i)
      if (mask >> i & 1) r.checkpoints.push_back(i + 1);
    r.sim = simulate(m, segment_schedule(m, r.checkpoints, "brute"));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace remat::test
