#include <filesystem>

#include "core/io/onnx_model.h"
#include "core/io/model_source.h"
#include "core/model/presets.h"

namespace remat {

Model load_model_with_notes(std::string_view spec_or_path, std::vector<std::string>* notes) {
  const std::string path(spec_or_path);
  if (!is_preset_spec(spec_or_path) && std::filesystem::path(path).extension() == ".onnx" &&
      std::filesystem::is_regular_file(path))
    return load_onnx_model(path, notes);
  return load_model(spec_or_path);
}

}  // namespace remat
