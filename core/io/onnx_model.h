// ONNX import (as torch.onnx.export writes it, opsets 13-17) into the memory
// model: see docs/model-format.md for the op mapping. load_onnx_model
// (model_source.h) is the plain entry point; these also return what the user
// must be told (ops that became simulate-only, the appended loss, folded ops).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/model.h"

namespace remat {

inline constexpr uint64_t kMaxOnnxFileBytes = uint64_t{2} << 30;

// False when the build found no ONNX library: the loaders then throw
// InputError "... built without ONNX support".
bool onnx_support();

Model load_onnx_model(const std::string& path, std::vector<std::string>* warnings);
// From bytes in memory (the fuzz target); `origin` starts every error message.
Model parse_onnx_model(const void* data, std::size_t size, const std::string& origin, const std::string& default_name,
                       std::vector<std::string>* warnings);

// load_model (model_source.h) that also collects the importer's notes.
Model load_model_with_notes(std::string_view spec_or_path, std::vector<std::string>* notes);

}  // namespace remat
