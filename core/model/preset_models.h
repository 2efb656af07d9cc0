// The presets of real architectures (presets.h lists every spec): a GPT-2
// stack with causal attention and a ResNet of basic blocks, built from the
// same ops the ONNX importer makes of torch's exports, so that a preset and
// the export of the same PyTorch model give the same figures.
#pragma once
#include <string>
#include <vector>

#include <optional>

#include "core/model/autocast.h"
#include "core/model/model.h"

namespace remat {

// Optional positional field i of spec `f` (split at ':') in [1, hi], or `fallback`.
int64_t spec_field(const std::vector<std::string>& f, std::size_t i, int64_t fallback, const char* what, int64_t hi,
                   const std::string& spec);
// Optional floating dtype field i (f32 when absent).
DType spec_dtype(const std::vector<std::string>& f, std::size_t i, const std::string& spec);

// A preset's precision (field DTYPE): f32, or bf16/f16 stored by every op
// ("bf16"), or torch.autocast to bf16/f16 on a device ("bf16@cuda",
// "f16@cpu"): each op's dtype as that device's autocast lists give it
// (autocast.h), its input fed in f32.
struct PresetPrecision {
  DType dtype = DType::F32;
  std::optional<AutocastDevice> autocast;
  // Gives `op` (about to be added to `m`) its dtype.
  void apply(Op& op, const Model& m) const;
};
PresetPrecision spec_precision(const std::vector<std::string>& f, std::size_t i, const std::string& spec);

// gpt:L[:D[:H[:SEQ[:BATCH[:DTYPE[:VOCAB]]]]]]; `f` is the spec split at ':'.
Model gpt_preset(const std::vector<std::string>& f, const std::string& spec);
// resnet:DEPTH[:WIDTH[:IMAGE[:BATCH[:CLASSES[:DTYPE]]]]]
Model resnet_preset(const std::vector<std::string>& f, const std::string& spec);

}  // namespace remat
