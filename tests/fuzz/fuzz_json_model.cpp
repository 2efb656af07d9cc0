// libFuzzer target: any bytes given to the JSON model loader either load or
// raise one InputError; nothing else (crash, hang, other exception) is allowed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/base/errors.h"
#include "core/io/json_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    const remat::Model m = remat::parse_json_model(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    // What loads must also write and load back.
    (void)remat::parse_json_model(remat::model_to_json(m).dump(), "fuzz-roundtrip");
  } catch (const remat::InputError&) {
  }
  return 0;
}
