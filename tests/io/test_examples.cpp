// The example models shipped in resources/models/ load and hold what their
// descriptions say.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/io/json_model.h"
#include "core/io/model_source.h"
#include "core/model/presets.h"

namespace remat {
namespace {

const std::string kDir = std::string(REMAT_SOURCE_DIR) + "/resources/models/";

TEST(Examples, EveryShippedModelLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    if (e.path().extension() != ".json" && e.path().extension() != ".onnx") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW((void)load_model(e.path().string()));
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(Examples, Chain16IsThePreset) {
  const Model m = load_model(kDir + "chain16.json"), p = make_preset("chain:16");
  ASSERT_EQ(m.size(), 17);
  for (int v = 0; v < m.size(); ++v) {
    EXPECT_EQ(m.op(v).bytes, 1u);
    EXPECT_EQ(m.op(v).saved, p.op(v).saved);
  }
}

// A shipped model file reads back into exactly the preset it was written from.
void expect_same(const Model& file, const Model& preset) {
  ASSERT_EQ(file.size(), preset.size());
  for (int v = 0; v < file.size(); ++v) {
    const Op &a = file.op(v), &b = preset.op(v);
    SCOPED_TRACE(b.name);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.aux_bytes, b.aux_bytes);
    EXPECT_EQ(a.saved, b.saved);
    EXPECT_EQ(a.view, b.view);
  }
  EXPECT_EQ(file.saved_bytes(), preset.saved_bytes());
  EXPECT_EQ(file.param_bytes(), preset.param_bytes());
}

TEST(Examples, Gpt2SmallIsTheGptPreset) {
  const Model m = load_model(kDir + "gpt2-small.json");
  // ids, wte, wpe, drop; 28 ops per block; ln_f, lm_head, loss.
  EXPECT_EQ(m.size(), 4 + 12 * 28 + 3);
  EXPECT_EQ(m.op(0).dtype, DType::I64);
  EXPECT_EQ(m.op(5).shape, (std::vector<int64_t>{1, 1024, 3 * 768}));  // h0.attn.c_attn
  EXPECT_TRUE(m.executable());  // bf16: mixed precision on the CPU backend
  expect_same(m, make_preset("gpt:12:768:12:1024:1:bf16"));
}

TEST(Examples, ResnetSmallIsResnet18) {
  const Model m = load_model(kDir + "resnet-small.json");
  EXPECT_TRUE(m.executable());  // f32 convolutions, batch norms, pools and views all run on the CPU
  EXPECT_EQ(m.op(1).name, "conv1");
  EXPECT_EQ(m.op(1).kind, OpKind::Conv);
  EXPECT_EQ(m.op(1).bytes, 8u * 64 * 16 * 16 * 4);
  EXPECT_EQ(m.op(1).param_bytes, 64u * 3 * 49 * 4);
  EXPECT_EQ(m.op(m.loss()).kind, OpKind::SoftmaxCELoss);
  expect_same(m, make_preset("resnet:18"));
}

}  // namespace
}  // namespace remat

#include <fstream>
#include <nlohmann/json.hpp>

namespace remat {
namespace {

// The JSON Schema CMake fills in from op_kinds.h names exactly the kinds the
// loader knows, in order, and the dtypes.
TEST(Schema, KindsAndDtypesMatchTheLoader) {
  std::ifstream in(REMAT_SCHEMA_FILE);
  ASSERT_TRUE(in) << REMAT_SCHEMA_FILE;
  const auto s = nlohmann::json::parse(in);
  const auto& props = s["$defs"]["op"]["properties"];
  std::vector<std::string> kinds;
  for (int k = 0; k <= static_cast<int>(kLastOpKind); ++k) kinds.emplace_back(kind_name(static_cast<OpKind>(k)));
  EXPECT_EQ(props["kind"]["enum"].get<std::vector<std::string>>(), kinds);
  EXPECT_EQ(props["dtype"]["enum"].get<std::vector<std::string>>(), (std::vector<std::string>{"f32", "f16", "bf16", "i32", "i64"}));
  EXPECT_EQ(props["shape"]["maxItems"], 8);
  EXPECT_EQ(s["properties"]["format"]["const"], "remat-model");
  // Every attribute the loader reads is described (the op allows no others).
  for (std::string_view key : attribute_keys()) EXPECT_TRUE(props.contains(std::string(key))) << key;
}

}  // namespace
}  // namespace remat
