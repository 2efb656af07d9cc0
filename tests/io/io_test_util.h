// Helpers of the model-file tests: load from text, expect one InputError.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "core/base/errors.h"
#include "core/io/json_model.h"

namespace remat::testing {

// The InputError message of loading `text`, or "" when it loads.
inline std::string json_error(const std::string& text) {
  try {
    (void)parse_json_model(text, "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A valid model's ops with `ops` spliced in: {"format":...,"ops":[OPS]}.
inline std::string doc(const std::string& ops) {
  return R"({"format":"remat-model","version":1,"name":"t","ops":[)" + ops + "]}";
}

}  // namespace remat::testing
