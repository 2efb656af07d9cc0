// Where a model comes from: a preset spec ("chain:16") or a file (.json, .onnx).
#pragma once
#include <string>
#include <string_view>

#include "core/model/model.h"

namespace remat {

// Throws InputError naming the spec or file and what is wrong.
Model load_model(std::string_view spec_or_path);

// Implemented by the loaders (json_model.cpp, onnx_model.cpp).
Model load_json_model(const std::string& path);
Model load_onnx_model(const std::string& path);
// Writes the project's JSON model format (docs/model-format.md), atomically.
void save_json_model(const Model& model, const std::string& path);

}  // namespace remat
