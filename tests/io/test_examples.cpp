// The example models shipped in resources/models/ load and hold what their
// descriptions say.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/model_source.h"
#include "core/presets.h"

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

TEST(Examples, Gpt2SmallSizes) {
  const Model m = load_model(kDir + "gpt2-small.json");
  EXPECT_EQ(m.size(), 1 + 12 * 12 + 3);
  EXPECT_EQ(m.op(0).shape, (std::vector<int64_t>{1024, 768}));
  EXPECT_EQ(m.op(8).shape, (std::vector<int64_t>{1024, 3072}));  // b0.mlp.up
  EXPECT_TRUE(m.executable());
  EXPECT_EQ(m.param_bytes(), make_preset("transformer:12:768:1024:1").param_bytes());
}

TEST(Examples, ResnetIsSimulateOnlyWithExplicitCosts) {
  const Model m = load_model(kDir + "resnet-small.json");
  EXPECT_FALSE(m.executable());
  EXPECT_EQ(m.op(1).name, "stem.conv");
  EXPECT_EQ(m.op(1).kind, OpKind::Generic);
  EXPECT_TRUE(m.op(1).simulate_only);
  EXPECT_EQ(m.op(1).bytes, 8u * 16 * 32 * 32 * 4);
  EXPECT_EQ(m.op(1).fwd_flops, 2.0 * 8 * 16 * 32 * 32 * 3 * 9);
  EXPECT_EQ(m.op(1).param_bytes, 16u * 3 * 9 * 4);
  EXPECT_EQ(m.op(m.loss()).kind, OpKind::SoftmaxCELoss);
}

}  // namespace
}  // namespace remat

#include <fstream>
#include <nlohmann/json.hpp>

namespace remat {
namespace {

// The shipped JSON Schema names exactly the kinds and dtypes the loader knows.
TEST(Schema, KindsAndDtypesMatchTheLoader) {
  std::ifstream in(std::string(REMAT_SOURCE_DIR) + "/resources/model.schema.json");
  const auto s = nlohmann::json::parse(in);
  const auto& props = s["$defs"]["op"]["properties"];
  std::vector<std::string> kinds;
  for (int k = 0; k <= static_cast<int>(OpKind::Generic); ++k) kinds.emplace_back(kind_name(static_cast<OpKind>(k)));
  EXPECT_EQ(props["kind"]["enum"].get<std::vector<std::string>>(), kinds);
  EXPECT_EQ(props["dtype"]["enum"].get<std::vector<std::string>>(), (std::vector<std::string>{"f32", "f16", "bf16", "i32"}));
  EXPECT_EQ(props["shape"]["maxItems"], 8);
  EXPECT_EQ(s["properties"]["format"]["const"], "remat-model");
}

}  // namespace
}  // namespace remat
