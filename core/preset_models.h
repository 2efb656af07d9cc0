// The presets of real architectures (presets.h lists every spec): a GPT-2
// stack with causal attention and a ResNet of basic blocks, built from the
// same ops the ONNX importer makes of torch's exports, so that a preset and
// the export of the same PyTorch model give the same figures.
#pragma once
#include <string>
#include <vector>

#include "core/model.h"

namespace remat {

// gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]; `f` is the spec split at ':'.
Model gpt_preset(const std::vector<std::string>& f, const std::string& spec);
// resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]
Model resnet_preset(const std::vector<std::string>& f, const std::string& spec);

}  // namespace remat
