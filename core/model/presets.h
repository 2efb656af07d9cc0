// Built-in models, named by spec strings:
//   chain:N[:BYTES]              input plus N ops (N-1 fused Dense, then the loss),
//                                every activation BYTES (default 1, so counts read as tensors)
//   mlp:N[:WIDTH[:BATCH]]        N Linear+ReLU layers, MSE loss
//   transformer:L[:D[:SEQ[:BATCH]]]  L pre-norm blocks (a token-mixer stand-in WITHOUT
//                                attention and an MLP, residual Adds, dropout),
//                                softmax cross-entropy loss; executable, for teaching
//   gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]  GPT-2 with causal attention (preset_gpt.cpp);
//                                gpt:12:768:12:1024:1:bf16 is GPT-2 small; DTYPE f32, bf16 or
//                                f16 (every op), or bf16@cuda, bf16@cpu, f16@cuda, f16@cpu
//                                (torch.autocast's dtypes on that device: autocast.h)
//   resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]  torchvision's ResNet-10/18/34
//                                of basic blocks (preset_resnet.cpp), 32x32 images by default
#pragma once
#include <string_view>

#include "core/model/model.h"

namespace remat {

// The specs, for help texts and errors.
inline constexpr std::string_view kPresetSpecs =
    "chain:N[:BYTES], mlp:N[:WIDTH[:BATCH]], transformer:L[:D[:SEQ[:BATCH]]] (no attention), "
    "gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]] or resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]";

bool is_preset_spec(std::string_view spec);
// Throws InputError naming the spec and the bad field.
Model make_preset(std::string_view spec);

}  // namespace remat
