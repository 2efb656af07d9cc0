// Helpers shared by the strategy tests: chains of unequal layers (no preset
// has them) and the checkpoint-set brute force the exact strategies are held to.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/strategies/checkpoint_sets.h"
#include "core/model/model.h"
#include "core/sim/simulator.h"

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

// A chain of `repeats` copies of one random block: x -> a few ops of
// LayerNorm, Linear, GELU, Tanh, ReLU, Dropout (each reading one of the
// block's earlier tensors) -> Add(x, last), so each block ends at a cut.
inline Model repeated_random_blocks(unsigned seed, int repeats, int ops) {
  std::mt19937 rng(seed);
  const OpKind kinds[] = {OpKind::LayerNorm, OpKind::Linear, OpKind::GELU, OpKind::Tanh, OpKind::ReLU, OpKind::Dropout};
  struct Step {
    OpKind kind;
    int from;  // 0: the block's input, k: its k-th op
    int64_t width;
  };
  std::vector<Step> steps;
  const int64_t d = 8;
  for (int k = 1; k <= ops; ++k) {
    Step s{kinds[rng() % 6], static_cast<int>(rng() % static_cast<unsigned>(k)), d};
    // The first op reads the input; later ones mostly the op before.
    if (k > 1 && rng() % 3 != 0) s.from = k - 1;
    steps.push_back(s);
  }
  Model m;
  m.name = "repeated " + std::to_string(seed);
  Op in;
  in.kind = OpKind::Input;
  in.name = "x";
  in.shape = {4, d};
  int x = m.add(in);
  for (int r = 0; r < repeats; ++r) {
    std::vector<int> ids{x};
    std::vector<int64_t> width{d};
    for (const Step& s : steps) {
      Op o;
      o.kind = s.kind;
      int src = ids[static_cast<std::size_t>(s.from)];
      int64_t w = width[static_cast<std::size_t>(s.from)];
      o.inputs = {src};
      if (s.kind == OpKind::Dropout) o.dropout_p = 0.1f;
      if (s.kind == OpKind::Linear) o.shape = {4, s.width}, w = s.width;
      ids.push_back(m.add(o));
      width.push_back(w);
    }
    // Back to width d for the residual sum.
    int last = ids.back();
    if (width.back() != d) {
      Op down;
      down.kind = OpKind::Linear;
      down.inputs = {last};
      down.shape = {4, d};
      last = m.add(down);
    }
    // Ops nothing else reads are summed in, so every op reaches the loss.
    std::vector<char> read(ids.size(), 0);
    for (std::size_t k = 1; k < ids.size(); ++k)
      for (int u : m.op(ids[k]).inputs)
        for (std::size_t j = 0; j < ids.size(); ++j)
          if (ids[j] == u) read[j] = 1;
    for (std::size_t k = 1; k + 1 < ids.size(); ++k) {
      if (read[k] || width[k] != d) continue;
      Op add;
      add.kind = OpKind::Add;
      add.inputs = {last, ids[k]};
      last = m.add(add);
    }
    Op res;
    res.kind = OpKind::Add;
    res.inputs = {x, last};
    x = m.add(res);
  }
  Op loss;
  loss.kind = OpKind::MSELoss;
  loss.inputs = {x};
  m.add(loss);
  m.finalize();
  return m;
}

// A random DAG of same-shaped tensors: Linear/Tanh/ReLU/LayerNorm/Add reading
// random earlier ops (skip edges of any length), ops nothing reads summed into
// the last one so everything reaches the loss.
inline Model random_dag(unsigned seed, int ops) {
  std::mt19937 rng(seed);
  Model m;
  m.name = "random" + std::to_string(seed);
  auto make = [](OpKind k, std::vector<int> in) {
    Op op;
    op.kind = k;
    op.name = "v";
    op.inputs = std::move(in);
    if (k == OpKind::Input || k == OpKind::Linear) op.shape = {2, 8};
    return op;
  };
  m.add(make(OpKind::Input, {}));
  std::vector<char> read(1, 0);
  const OpKind kinds[] = {OpKind::Linear, OpKind::Tanh, OpKind::ReLU, OpKind::LayerNorm, OpKind::Add, OpKind::Add};
  for (int i = 1; i < ops; ++i) {
    const OpKind k = kinds[rng() % 6];
    const int a = static_cast<int>(rng() % static_cast<unsigned>(i));
    const int b = std::max(0, i - 1 - static_cast<int>(rng() % 3));
    std::vector<int> in = k == OpKind::Add ? std::vector<int>{a, b} : std::vector<int>{rng() % 2 ? a : i - 1};
    if (k == OpKind::Add && a == b) in = {a};
    for (int u : in) read[static_cast<std::size_t>(u)] = 1;
    m.add(make(in.size() == 1 && k == OpKind::Add ? OpKind::Tanh : k, in));
    read.push_back(0);
  }
  int last = ops - 1;
  for (int u = 0; u < ops - 1; ++u)
    if (!read[static_cast<std::size_t>(u)]) last = m.add(make(OpKind::Add, {last, u}));
  test::finish_with_mse_loss(m, last);
  return m;
}

// The same with tensors of three widths (Linear changes it; Adds join equal
// widths), so held bytes and FLOPs trade off between checkpoints.
inline Model mixed_width_dag(unsigned seed, int ops) {
  std::mt19937 rng(seed);
  Model m;
  m.name = "mixed" + std::to_string(seed);
  const int64_t widths[] = {4, 16, 64};
  std::vector<int64_t> w;  // per op
  auto add = [&](OpKind k, std::vector<int> in, int64_t width) {
    Op op;
    op.kind = k;
    op.name = "v";
    op.inputs = std::move(in);
    if (k == OpKind::Input || k == OpKind::Linear) op.shape = {2, width};
    w.push_back(width);
    return m.add(std::move(op));
  };
  add(OpKind::Input, {}, 16);
  std::vector<char> read(1, 0);
  for (int i = 1; i < ops; ++i) {
    const unsigned kind = rng() % 6;
    const int a = static_cast<int>(rng() % static_cast<unsigned>(i));
    const int prev = std::max(0, i - 1 - static_cast<int>(rng() % 3));
    std::vector<int> in;
    if (kind == 0) {
      in = {rng() % 2 ? a : i - 1};
      add(OpKind::Linear, in, widths[rng() % 3]);
    } else if (kind <= 3) {
      in = {rng() % 2 ? a : i - 1};
      add(kind == 1 ? OpKind::Tanh : kind == 2 ? OpKind::ReLU : OpKind::LayerNorm, in, w[static_cast<std::size_t>(in[0])]);
    } else {
      int b = -1;
      for (int t = 0; t < 8 && b < 0; ++t) {
        const int x = static_cast<int>(rng() % static_cast<unsigned>(i));
        if (x != prev && w[static_cast<std::size_t>(x)] == w[static_cast<std::size_t>(prev)]) b = x;
      }
      in = b < 0 ? std::vector<int>{prev} : std::vector<int>{prev, b};
      add(b < 0 ? OpKind::Tanh : OpKind::Add, in, w[static_cast<std::size_t>(prev)]);
    }
    for (int u : in) read[static_cast<std::size_t>(u)] = 1;
    read.push_back(0);
  }
  int last = ops - 1;
  for (int u = 0; u < ops - 1; ++u) {
    if (read[static_cast<std::size_t>(u)]) continue;
    const int64_t width = w[static_cast<std::size_t>(last)];
    const int x = w[static_cast<std::size_t>(u)] == width ? u : add(OpKind::Linear, {u}, width);
    last = add(OpKind::Add, {last, x}, width);
  }
  test::finish_with_mse_loss(m, last);
  return m;
}

// A random DAG of 4x4 tensors with views and private saved tensors:
// Transpose (a view, chains of views included), Dropout and LayerNorm (aux),
// MatMul (saves both inputs, often two aliases of one storage), Linear, ReLU,
// Add; ops nothing reads are summed into the last one.
inline Model views_aux_dag(unsigned seed, int ops) {
  std::mt19937 rng(seed);
  Model m;
  m.name = "views" + std::to_string(seed);
  auto add = [&](OpKind k, std::vector<int> in) {
    Op op;
    op.kind = k;
    op.name = std::string(kind_name(k)) + std::to_string(m.size());
    op.inputs = std::move(in);
    if (k == OpKind::Input || k == OpKind::Linear) op.shape = {4, 4};
    if (k == OpKind::Dropout) op.dropout_p = 0.5f;
    return m.add(std::move(op));
  };
  add(OpKind::Input, {});
  std::vector<char> read(1, 0);
  const OpKind kinds[] = {OpKind::Transpose, OpKind::Transpose, OpKind::Dropout, OpKind::LayerNorm,
                          OpKind::MatMul,    OpKind::Linear,    OpKind::ReLU,    OpKind::Add};
  for (int i = 1; i < ops; ++i) {
    const OpKind k = kinds[rng() % 8];
    const int a = static_cast<int>(rng() % static_cast<unsigned>(i));
    const int prev = i - 1;
    std::vector<int> in = k == OpKind::MatMul || k == OpKind::Add ? std::vector<int>{prev, a} : std::vector<int>{rng() % 2 ? a : prev};
    for (int u : in) read[static_cast<std::size_t>(u)] = 1;
    add(k, in);
    read.push_back(0);
  }
  int last = ops - 1;
  for (int u = 0; u < ops - 1; ++u)
    if (!read[static_cast<std::size_t>(u)]) last = add(OpKind::Add, {last, u});
  finish_with_mse_loss(m, last);
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
