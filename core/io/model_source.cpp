#include "core/io/model_source.h"

#include <filesystem>

#include "core/base/errors.h"
#include "core/model/presets.h"

namespace remat {

Model load_model(std::string_view spec_or_path) {
  if (is_preset_spec(spec_or_path)) return make_preset(spec_or_path);
  const std::string path(spec_or_path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError("model '" + path + "' is neither a preset (chain:N, mlp:N, transformer:L, gpt:L, resnet:DEPTH) nor a readable file");
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".onnx") return load_onnx_model(path);
  return load_json_model(path);
}

}  // namespace remat
