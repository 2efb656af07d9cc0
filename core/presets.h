// Built-in models, named by spec strings:
//   chain:N[:BYTES]              input plus N ops (N-1 fused Dense, then the loss),
//                                every activation BYTES (default 1, so counts read as tensors)
//   mlp:N[:WIDTH[:BATCH]]        N Linear+ReLU layers, MSE loss
//   transformer:L[:D[:SEQ[:BATCH]]]  L pre-norm blocks (mixer and MLP sublayers,
//                                residual Adds, dropout), softmax cross-entropy loss
#pragma once
#include <string_view>

#include "core/model.h"

namespace remat {

bool is_preset_spec(std::string_view spec);
// Throws InputError naming the spec and the bad field.
Model make_preset(std::string_view spec);

}  // namespace remat
