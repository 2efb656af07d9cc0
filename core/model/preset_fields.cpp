// The positional fields the presets of preset_models.h share.
#include "core/base/errors.h"
#include "core/model/preset_models.h"
#include "core/base/spec_parse.h"

namespace remat {

int64_t spec_field(const std::vector<std::string>& f, std::size_t i, int64_t fallback, const char* what, int64_t hi,
                   const std::string& spec) {
  return i < f.size() ? parse_int(f[i], std::string(what) + " in '" + spec + "'", 1, hi) : fallback;
}

DType spec_dtype(const std::vector<std::string>& f, std::size_t i, const std::string& spec) {
  DType dtype = DType::F32;
  if (f.size() > i && (!parse_dtype(f[i], dtype) || is_integer(dtype)))
    throw InputError("DTYPE in '" + spec + "' must be f32, f16 or bf16, got '" + f[i] + "'");
  return dtype;
}

}  // namespace remat
