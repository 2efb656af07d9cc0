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

PresetPrecision spec_precision(const std::vector<std::string>& f, std::size_t i, const std::string& spec) {
  PresetPrecision p;
  if (f.size() <= i) return p;
  const std::string& text = f[i];
  const std::size_t at = text.find('@');
  const std::string dtype = text.substr(0, at);
  if (at == std::string::npos) {
    p.dtype = spec_dtype(f, i, spec);
    return p;
  }
  if (!parse_dtype(dtype, p.dtype) || is_integer(p.dtype) || p.dtype == DType::F32)
    throw InputError("DTYPE in '" + spec + "': autocast runs to bf16 or f16 on a device "
                     "(bf16@cuda, bf16@cpu, f16@cuda, f16@cpu), got '" + text + "'");
  AutocastDevice d{};
  if (!parse_autocast_device(text.substr(at + 1), d))
    throw InputError("DTYPE in '" + spec + "': the autocast device after '@' must be cpu or cuda, got '" +
                     text.substr(at + 1) + "'");
  p.autocast = d;
  return p;
}

void PresetPrecision::apply(Op& op, const Model& m) const {
  if (is_integer(op.dtype)) return;
  op.dtype = autocast ? autocast_dtype(op, m.ops(), dtype, *autocast) : dtype;
}

}  // namespace remat
