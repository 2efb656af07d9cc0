// The project's JSON model format (docs/model-format.md, resources/model.schema.json.in):
// {"format":"remat-model","version":1,"name":...,"ops":[...]}, ops in topological
// order with id == position. load_json_model/save_json_model (model_source.h)
// are the file-level entry points; these work on text and documents.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model.h"

namespace remat {

// Loading limits: anything beyond them is refused with an InputError before
// work proportional to it is done.
inline constexpr uint64_t kMaxJsonModelFileBytes = uint64_t{256} << 20;
inline constexpr std::size_t kMaxModelOps = 10'000'000;
inline constexpr std::size_t kMaxRank = 8;
inline constexpr std::size_t kMaxOpInputs = 256;
inline constexpr int kMaxJsonDepth = 32;

// Parses and checks a model; errors read "ORIGIN: /ops/3/shape/1: ...".
// `default_name` is used when the document has no "name".
Model parse_json_model(std::string_view text, const std::string& origin, const std::string& default_name = "model");
Model model_from_json(const nlohmann::json& doc, const std::string& origin, const std::string& default_name = "model");

// The document save_json_model writes: explicit "bytes", costs, "saved",
// "param_bytes" and "simulate_only" only where they differ from what the op's
// kind derives (op_rules.h), so a file read back gives the identical graph.
// Parameter values (Op::param_init) are not written.
nlohmann::ordered_json model_to_json(const Model& model);

// The attribute keys the reader takes (each for some kinds), for the schema's test.
std::vector<std::string_view> attribute_keys();

}  // namespace remat
