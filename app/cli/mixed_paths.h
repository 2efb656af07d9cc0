// What `remat run` says of mixed precision's three 16-bit paths on CUDA
// (docs/run.md#mixed-precision-bf16-and-f16): for each, the table's line and
// the JSON's field, from the environment's switch, read as the backend reads
// it (core/exec/gemm_path.h, pointwise_path.h).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model.h"

namespace remat {

struct MixedPathReport {
  const char* key;      // the JSON's field: cuda_gemm, cuda_conv, cuda_pointwise
  std::string line;     // empty where nothing is said (the CPU, or no such op)
  nlohmann::json json;  // null then
};

// The products', the convolutions' and the memory-bound ops', in that order.
std::vector<MixedPathReport> mixed_path_reports(const Model& model, const std::string& backend);

}  // namespace remat
