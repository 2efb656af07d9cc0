// The torch plan (core/io/torch_plan.h): the capture's "torch" fields read,
// written back and checked; a plan's kept set, phases and figures on a
// captured chain, derived by hand from the strategy; models that were not
// captured refused; nested, offload and compress schedules named so.
#include <gtest/gtest.h>

#include "core/analysis/comparison.h"
#include "core/io/json_model.h"
#include "core/io/torch_plan.h"
#include "core/io/model_source.h"
#include "core/model/presets.h"
#include "tests/io/io_test_util.h"

namespace remat {
namespace {

using testing::doc;
using testing::json_error;

// x -> Linear -> Tanh -> Linear -> Tanh -> Linear -> MSE, every activation
// 4 x 8 f32 = 128 bytes, as remat_capture writes it.
const char* kCaptured = R"({"format":"remat-model","version":1,"name":"captured","ops":[
  {"id":0,"kind":"Input","name":"x","shape":[4,8],"torch":{"module":""}},
  {"id":1,"kind":"Linear","inputs":[0],"name":"0.linear","shape":[4,8],"saved":[0],
   "torch":{"module":"0","aten":"aten.addmm.default","call":0,"place":1}},
  {"id":2,"kind":"Tanh","inputs":[1],"name":"1.tanh","saved":[2],
   "torch":{"module":"1","aten":"aten.tanh.default","call":0,"place":0}},
  {"id":3,"kind":"Linear","inputs":[2],"name":"2.linear","shape":[4,8],"saved":[2],
   "torch":{"module":"2","aten":"aten.addmm.default","call":1,"place":1}},
  {"id":4,"kind":"Tanh","inputs":[3],"name":"3.tanh","saved":[4],
   "torch":{"module":"3","aten":"aten.tanh.default","call":1,"place":0}},
  {"id":5,"kind":"Linear","inputs":[4],"name":"4.linear","shape":[4,8],"saved":[4],
   "torch":{"module":"4","aten":"aten.addmm.default","call":2,"place":1}},
  {"id":6,"kind":"MSELoss","inputs":[5],"saved":[5],"torch":{"aten":"aten.mse_loss.default","call":0,"place":0}}]})";

StrategyRun run_of(const Model& m, const std::string& spec) {
  auto runs = simulate_strategies(m, {spec});
  EXPECT_TRUE(runs.front().ok()) << runs.front().error;
  return runs.front();
}

TEST(TorchPlan, CaptureFieldsAreReadAndWrittenBack) {
  const Model m = parse_json_model(kCaptured, "captured.json");
  ASSERT_EQ(m.torch_origin.size(), 7u);
  EXPECT_EQ(m.torch_origin[0], (TorchOrigin{"", false, "", -1, -1}));
  EXPECT_EQ(m.torch_origin[3], (TorchOrigin{"2", false, "aten.addmm.default", 1, 1}));
  EXPECT_TRUE(m.torch_origin[6].outside);  // the loss function ran outside the module
  const Model again = model_from_json(nlohmann::json::parse(model_to_json(m).dump()), "again");
  EXPECT_EQ(again.torch_origin, m.torch_origin);
  EXPECT_TRUE(load_model("chain:4").torch_origin.empty());
}

TEST(TorchPlan, BadTorchFieldsNameTheField) {
  const std::string in = R"({"id":0,"kind":"Input","shape":[4,8]},)";
  const std::string loss = R"({"id":2,"kind":"MSELoss","inputs":[1]})";
  EXPECT_NE(json_error(doc(in + R"({"id":1,"kind":"ReLU","inputs":[0],"torch":3},)" + loss))
                .find("/ops/1/torch: expected an object"),
            std::string::npos);
  EXPECT_NE(json_error(doc(in + R"({"id":1,"kind":"ReLU","inputs":[0],"torch":{"aten":"aten.relu.default"}},)" + loss))
                .find("/ops/1/torch: an op with 'aten' needs 'call' and 'place'"),
            std::string::npos);
  EXPECT_NE(json_error(doc(in + R"({"id":1,"kind":"ReLU","inputs":[0],"torch":{"modul":""}},)" + loss))
                .find("/ops/1/torch/modul: unknown field 'modul'"),
            std::string::npos);
  EXPECT_NE(json_error(doc(in + R"({"id":1,"kind":"ReLU","inputs":[0],"torch":{"aten":"a","call":-1,"place":0}},)" +
                           loss))
                .find("/ops/1/torch/call"),
            std::string::npos);
}

// every-k:3 cuts after op 3, whose output only op 4 reads (a Tanh keeps its
// own output): cut_checkpoints keeps A(3), which no backward step reads, so
// it is freed in the forward pass. The last phase (ops 4-6) reads what the
// forward pass left: A(4) (Tanh's and the Linear's save) and A(5) (the
// loss's); the first phase recomputes ops 1 and 2 from the input for bwd 3.
TEST(TorchPlan, KeptSetPhasesAndFiguresOfACutSchedule) {
  const Model m = parse_json_model(kCaptured, "captured.json");
  const StrategyRun run = run_of(m, "every-k:3");
  const TorchPlan plan = make_torch_plan(m, run);
  EXPECT_EQ(plan.kind, "checkpoint-set");
  EXPECT_EQ(plan.phases, 1);
  const std::vector<bool> keep = {true, false, false, false, true, true, false};
  for (int v = 0; v < m.size(); ++v) EXPECT_EQ(plan.ops[static_cast<std::size_t>(v)].keep, keep[static_cast<std::size_t>(v)]) << v;
  EXPECT_EQ(plan.forward_end_bytes, 3u * 128);
  EXPECT_EQ(plan.ops[1].phase, 0);
  EXPECT_EQ(plan.ops[2].phase, 0);
  EXPECT_EQ(plan.ops[3].phase, -1);
  EXPECT_EQ(plan.ops[1].recomputes, 1);
  EXPECT_EQ(plan.recompute_steps, 2);
  EXPECT_EQ(plan.peak_bytes, run.sim.peak_bytes);

  const auto j = torch_plan_json(m, plan);
  EXPECT_EQ(j["format"], "remat-torch-plan");
  EXPECT_EQ(j["strategy"], "every-k:3");
  EXPECT_EQ(j["predicted"]["forward_end_bytes"], 384);
  EXPECT_EQ(j["predicted"]["saved_bytes"], m.saved_bytes());
  EXPECT_EQ(j["ops"][3]["module"], "2");
  EXPECT_EQ(j["ops"][3]["aten"], "aten.addmm.default");
  EXPECT_EQ(j["ops"][3]["call"], 1);
  EXPECT_EQ(j["ops"][3]["inputs"], nlohmann::ordered_json::array({2}));
  EXPECT_TRUE(j["ops"][6]["module"].is_null());  // ran outside the module
  EXPECT_EQ(j["ops"][6]["saved"], nlohmann::ordered_json::array({5}));
}

// store-all keeps what autograd saves: the model's saved_bytes exactly.
TEST(TorchPlan, StoreAllKeepsTheSavedBytes) {
  const Model m = parse_json_model(kCaptured, "captured.json");
  const TorchPlan plan = make_torch_plan(m, run_of(m, "store-all"));
  EXPECT_EQ(plan.forward_end_bytes, m.saved_bytes());
  EXPECT_EQ(plan.phases, 0);
  EXPECT_EQ(plan.recompute_steps, 0);
}

TEST(TorchPlan, KindsOfSchedules) {
  const Model m = parse_json_model(kCaptured, "captured.json");
  EXPECT_EQ(make_torch_plan(m, run_of(m, "recompute-all")).kind, "nested");
  EXPECT_EQ(make_torch_plan(m, run_of(m, "offload:3")).kind, "offload");
  EXPECT_EQ(make_torch_plan(m, run_of(m, "every-k:3+compress:bf16")).kind, "compress");
}

// The one checkpoint every-k:3 keeps for its phase is the input: the op that
// compress converts (with its type) and offload:3 moves; no other op is marked.
TEST(TorchPlan, CompressedAndOffloadedOpsAreNamed) {
  const Model m = parse_json_model(kCaptured, "captured.json");
  const TorchPlan c = make_torch_plan(m, run_of(m, "every-k:3+compress:f16"));
  const TorchPlan o = make_torch_plan(m, run_of(m, "offload:3"));
  for (int v = 0; v < m.size(); ++v) {
    const auto i = static_cast<std::size_t>(v);
    EXPECT_EQ(c.ops[i].compress, v == 0 ? "f16" : "") << v;
    EXPECT_FALSE(c.ops[i].offload) << v;
    EXPECT_EQ(o.ops[i].offload, v == 0) << v;
    EXPECT_EQ(o.ops[i].compress, "") << v;
  }
  const auto j = torch_plan_json(m, c);
  EXPECT_EQ(j["ops"][0]["compress"], "f16");
  EXPECT_TRUE(j["ops"][1]["compress"].is_null());
  EXPECT_EQ(j["ops"][0]["offload"], false);
  EXPECT_EQ(torch_plan_json(m, o)["ops"][0]["offload"], true);
}

TEST(TorchPlan, ModelsThatWereNotCapturedAreRefused) {
  const Model m = load_model("mlp:4");
  try {
    (void)make_torch_plan(m, run_of(m, "sqrt"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("was not captured from PyTorch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
