// Placeholder until the JSON model loader lands (issue 5).
#include "core/errors.h"
#include "core/model_source.h"

namespace remat {
Model load_json_model(const std::string& path) { throw InputError("'" + path + "': JSON model files are not supported yet"); }
Model load_onnx_model(const std::string& path) { throw InputError("'" + path + "': ONNX model files are not supported yet"); }
void save_json_model(const Model&, const std::string& path) { throw InputError("'" + path + "': writing JSON models is not supported yet"); }
}  // namespace remat
