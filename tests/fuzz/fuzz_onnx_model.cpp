// libFuzzer target: any bytes given to the ONNX importer either load or raise
// one InputError; nothing else (crash, hang, other exception) is allowed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/io/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::vector<std::string> warnings;
  try {
    (void)remat::parse_onnx_model(data, size, "fuzz", "fuzz", &warnings);
  } catch (const remat::InputError&) {
  }
  return 0;
}
