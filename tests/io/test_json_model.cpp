// The JSON model format: the documented example, round trips of every preset,
// explicit overrides, and one clear error per kind of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "core/io/json_model.h"
#include "core/io/model_source.h"
#include "core/model/presets.h"
#include "tests/io/io_test_util.h"

namespace remat {
namespace {

using testing::doc;
using testing::json_error;

const char* kExample = R"({"format":"remat-model","version":1,"name":"example","ops":[
  {"id":0,"name":"x","kind":"Input","shape":[4,8],"dtype":"f32"},
  {"id":1,"name":"l1.fc","kind":"Linear","inputs":[0],"shape":[4,8]},
  {"id":2,"kind":"ReLU","inputs":[1]},
  {"id":3,"kind":"Dense","inputs":[2],"shape":[4,8],"activation":"tanh"},
  {"id":4,"kind":"Dropout","inputs":[3],"p":0.1},
  {"id":5,"kind":"MSELoss","inputs":[4]}]})";

TEST(JsonModel, DocumentedExampleLoadsWithDerivedValues) {
  const Model m = parse_json_model(kExample, "example.json");
  ASSERT_EQ(m.size(), 6);
  EXPECT_EQ(m.name, "example");
  EXPECT_EQ(m.op(1).name, "l1.fc");
  EXPECT_EQ(m.op(2).name, "ReLU2");  // default name: kind and id
  EXPECT_EQ(m.op(2).shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(m.op(1).bytes, 4u * 8 * 4);
  EXPECT_EQ(m.op(1).param_bytes, (8u * 8 + 8) * 4);
  EXPECT_DOUBLE_EQ(m.op(1).fwd_flops, 2.0 * 4 * 8 * 8);
  EXPECT_EQ(m.op(3).act, Activation::Tanh);
  EXPECT_EQ(m.op(3).saved, (std::vector<int>{2, 3}));
  EXPECT_FLOAT_EQ(m.op(4).dropout_p, 0.1f);
  EXPECT_EQ(m.op(5).kind, OpKind::MSELoss);
  EXPECT_TRUE(m.executable());
}

void expect_identical(const Model& a, const Model& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.name, b.name);
  for (int v = 0; v < a.size(); ++v) {
    SCOPED_TRACE("op " + std::to_string(v));
    const Op &x = a.op(v), &y = b.op(v);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.fwd_flops, y.fwd_flops);
    EXPECT_EQ(x.bwd_flops, y.bwd_flops);
    EXPECT_EQ(x.saved, y.saved);
    EXPECT_EQ(x.param_bytes, y.param_bytes);
    EXPECT_EQ(x.act, y.act);
    EXPECT_EQ(x.dropout_p, y.dropout_p);
    EXPECT_EQ(x.simulate_only, y.simulate_only);
    EXPECT_EQ(x.aux_bytes, y.aux_bytes);
    EXPECT_EQ(*x.attrs, *y.attrs);
    EXPECT_EQ(x.view, y.view);
    EXPECT_EQ(*x.strides, *y.strides);
  }
}

class PresetRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(PresetRoundTrip, WrittenAndReadBackIsIdentical) {
  const Model m = make_preset(GetParam());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("remat_rt_" + std::to_string(::getpid()) + "_" + std::to_string(std::hash<std::string>{}(GetParam())) + ".json")).string();
  save_json_model(m, path);
  const Model back = load_model(path);
  std::filesystem::remove(path);
  expect_identical(m, back);
  // And the text form is a fixed point.
  EXPECT_EQ(model_to_json(back).dump(), model_to_json(m).dump());
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetRoundTrip,
                         ::testing::Values("chain:16", "chain:8:64", "mlp:4:32:8", "transformer:2:32:8:2", "chain:5:3",
                                           "gpt:2:32:4:8:2:bf16:50", "resnet:10:8"));

TEST(JsonModel, AttributesOfTheNewKinds) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[2,3,8,8]},
    {"id":1,"kind":"Conv","inputs":[0],"channels":4,"kernel":[3,3],"pads":[1,1,1,1],"bias":false},
    {"id":2,"kind":"MaxPool","inputs":[1],"kernel":[2,2]},
    {"id":3,"kind":"Reshape","inputs":[2],"shape":[2,64]},
    {"id":4,"kind":"Slice","inputs":[3],"axis":1,"start":0,"end":32,"aux_bytes":7},
    {"id":5,"kind":"Reshape","inputs":[4],"shape":[2,32],"copy":true},
    {"id":6,"kind":"MSELoss","inputs":[5]})"), "c.json");
  EXPECT_EQ(m.op(1).shape, (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_EQ(m.op(1).param_bytes, 4u * 3 * 9 * 4);
  EXPECT_EQ(m.op(2).shape, (std::vector<int64_t>{2, 4, 4, 4}));  // stride defaults to the kernel
  EXPECT_EQ(m.op(2).aux_bytes, 2u * 64 * 8);
  EXPECT_TRUE(m.op(3).view);
  EXPECT_EQ(m.op(4).shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(m.op(4).aux_bytes, 7u);  // explicit
  EXPECT_TRUE(m.op(5).attrs->copy);   // a clone: its own bytes, where a view would do
  EXPECT_FALSE(m.op(5).view);
  EXPECT_EQ(m.op(5).bytes, 2u * 32 * 4);
  EXPECT_EQ(model_to_json(m)["ops"][5]["copy"], true);
  EXPECT_FALSE(model_to_json(m)["ops"][3].contains("copy"));
  expect_identical(m, parse_json_model(model_to_json(m).dump(), "again"));
}

// A cross-entropy's label smoothing: read, written back only when not 0, and
// the same op again after a round trip.
TEST(JsonModel, LabelSmoothingRoundTrips) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[4,8]},
    {"id":1,"kind":"Linear","inputs":[0],"shape":[4,5]},
    {"id":2,"kind":"SoftmaxCELoss","inputs":[1],"label_smoothing":0.1})"), "ls.json");
  EXPECT_EQ(m.op(2).attrs->label_smoothing, 0.1);
  const auto j = model_to_json(m);
  EXPECT_EQ(j["ops"][2]["label_smoothing"], 0.1);
  expect_identical(m, parse_json_model(j.dump(), "again"));
  const Model plain = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[4,8]},
    {"id":1,"kind":"SoftmaxCELoss","inputs":[0]})"), "ce.json");
  EXPECT_EQ(plain.op(1).attrs->label_smoothing, 0.0);
  EXPECT_FALSE(model_to_json(plain)["ops"][1].contains("label_smoothing"));
}

// The pools' attributes PyTorch's classic CNNs use: ceil_mode, dilation,
// count_include_pad and adaptive pooling's output_size; the writer keeps
// count_include_pad only when false and an adaptive pool's output_size alone.
TEST(JsonModel, PoolAttributesRoundTrip) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[2,3,9,9]},
    {"id":1,"kind":"MaxPool","inputs":[0],"kernel":[3,3],"stride":[2,2],"dilation":[2,1],"ceil_mode":true},
    {"id":2,"kind":"AvgPool","inputs":[1],"kernel":[3,3],"stride":[2,2],"pads":[1,1,1,1],"ceil_mode":true,"count_include_pad":false},
    {"id":3,"kind":"AvgPool","inputs":[2],"output_size":[5,4]},
    {"id":4,"kind":"MSELoss","inputs":[3]})"), "p.json");
  EXPECT_EQ(m.op(1).shape, (std::vector<int64_t>{2, 3, 3, 4}));  // (9-5+1)/2+1 = 3 (last start 4 < 9), (9-3+1)/2+1 = 4
  EXPECT_EQ(m.op(2).shape, (std::vector<int64_t>{2, 3, 2, 3}));  // (3+2-3+1)/2+1 = 2, (4+2-3+1)/2+1 = 3
  EXPECT_FALSE(m.op(2).attrs->count_include_pad);
  EXPECT_EQ(m.op(3).shape, (std::vector<int64_t>{2, 3, 5, 4}));
  const auto j = model_to_json(m);
  EXPECT_EQ(j["ops"][2]["count_include_pad"], false);
  EXPECT_FALSE(j["ops"][1].contains("count_include_pad"));
  EXPECT_EQ(j["ops"][3]["output_size"], (std::vector<int64_t>{5, 4}));
  EXPECT_FALSE(j["ops"][3].contains("kernel"));
  EXPECT_FALSE(j["ops"][3].contains("ceil_mode"));
  expect_identical(m, parse_json_model(j.dump(), "again"));
}

TEST(JsonModel, ConstantsCarryTheirValues) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[2,3],"dtype":"i64"},
    {"id":1,"kind":"Embedding","inputs":[0],"shape":[2,3,4],"vocab":9},
    {"id":2,"kind":"AddConst","inputs":[1],"const_shape":[3,4],"learned":true},
    {"id":3,"kind":"MulConst","inputs":[2],"values":0.25},
    {"id":4,"kind":"DivConst","inputs":[3],"const_shape":[4],"values":[1,2,4,8]},
    {"id":5,"kind":"Reshape","inputs":[4],"shape":[2,1,3,4]},
    {"id":6,"kind":"Slice","inputs":[5],"axis":3,"start":0,"end":3},
    {"id":7,"kind":"MaskedFill","inputs":[6],"const_shape":[1,1,3,3],"values":"causal"},
    {"id":8,"kind":"MaskedFill","inputs":[7],"const_shape":[3],"values":[0,1,0],"fill":0.5},
    {"id":9,"kind":"MSELoss","inputs":[8]})"), "k.json");
  EXPECT_TRUE(m.op(2).attrs->learned);
  EXPECT_EQ(m.op(2).param_bytes, 4u * 3 * 4);  // a learned constant is a parameter
  ASSERT_EQ(m.op(3).attrs->values.size(), 1u);
  EXPECT_EQ(m.op(3).attrs->values.data()[0], 0.25f);
  EXPECT_EQ(*m.op(4).attrs->values.values, (std::vector<float>{1, 2, 4, 8}));
  // "causal": 1 strictly above the diagonal.
  EXPECT_EQ(*m.op(7).attrs->values.values, (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(m.op(7).attrs->fill, -std::numeric_limits<float>::infinity());  // the default
  EXPECT_EQ(m.op(8).attrs->fill, 0.5f);
  const auto j = model_to_json(m);
  EXPECT_EQ(j["ops"][7]["values"], "causal");  // written back in its short form
  EXPECT_EQ(j["ops"][7]["fill"], "-inf");
  EXPECT_EQ(j["ops"][8]["values"].size(), 3u);
  expect_identical(m, parse_json_model(j.dump(), "again"));
}

TEST(JsonModel, WriterKeepsOnlyOverridesThatDiffer) {
  const auto j = model_to_json(make_preset("chain:16"));
  // Unit bytes differ from the [1,1] f32 shape's 4 bytes, and the chain is simulate-only.
  EXPECT_EQ(j["ops"][1].dump(),
            R"({"id":1,"name":"a1","kind":"Dense","inputs":[0],"shape":[1,1],"activation":"tanh","bytes":1,"simulate_only":true})");
  const auto t = model_to_json(make_preset("mlp:4:32:8"));
  EXPECT_EQ(t["ops"][1].dump(), R"({"id":1,"name":"l1.fc","kind":"Linear","inputs":[0],"shape":[8,32]})");
  EXPECT_EQ(t["ops"][9].dump(), R"({"id":9,"name":"loss","kind":"MSELoss","inputs":[8]})");
}

TEST(JsonModel, ExplicitCustomOpValuesAreKept) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[2,3,16,16]},
    {"id":1,"name":"conv","kind":"Generic","inputs":[0],"shape":[2,8,16,16],"bytes":99,"fwd_flops":1e6,"bwd_flops":2e6,"saved":[0],"param_bytes":1000},
    {"id":2,"kind":"Add","inputs":[1,1]},
    {"id":3,"kind":"MSELoss","inputs":[2],"dtype":"f32"})"), "c.json");
  EXPECT_EQ(m.op(1).bytes, 99u);
  EXPECT_EQ(m.op(1).fwd_flops, 1e6);
  EXPECT_EQ(m.op(1).bwd_flops, 2e6);
  EXPECT_EQ(m.op(1).saved, (std::vector<int>{0}));
  EXPECT_EQ(m.op(1).param_bytes, 1000u);
  EXPECT_TRUE(m.op(1).simulate_only);
  EXPECT_EQ(m.op(2).bytes, 2u * 8 * 16 * 16 * 4);
  EXPECT_FALSE(m.executable());
  const auto back = parse_json_model(model_to_json(m).dump(), "again");
  expect_identical(m, back);
}

struct BadCase {
  const char* what;
  std::string text;
  const char* message;  // an exact fragment of the error
};

class BadJson : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadJson, OneClearError) {
  const std::string e = json_error(GetParam().text);
  EXPECT_NE(e.find(GetParam().message), std::string::npos) << "got: " << e;
  EXPECT_EQ(e.rfind("m.json: ", 0), 0u) << e;
}

const std::string kIn = R"({"id":0,"kind":"Input","shape":[4,8]})";
// Cases of the new kinds' attributes are at the end of the list.
const std::string kLoss1 = R"({"id":1,"kind":"MSELoss","inputs":[0]})";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadJson,
    ::testing::Values(
        BadCase{"syntax", R"({"format":"remat-model",)", "not valid JSON (byte 25)"},
        BadCase{"not an object", "[1,2]", "/: expected a JSON object"},
        BadCase{"empty file", "", "not valid JSON (byte 1)"},
        BadCase{"format", R"({"format":"onnx","version":1,"ops":[]})", "/format: expected \"remat-model\", got \"onnx\""},
        BadCase{"missing format", R"({"version":1,"ops":[]})", "/: missing field 'format'"},
        BadCase{"version", R"({"format":"remat-model","version":2,"ops":[]})", "/version: version 2 is not supported (this build reads version 1)"},
        BadCase{"version type", R"({"format":"remat-model","version":"1","ops":[]})", "/version: expected an integer, got a string"},
        BadCase{"unknown top field", R"({"format":"remat-model","version":1,"opz":[]})", "/opz: unknown field 'opz'"},
        BadCase{"missing ops", R"({"format":"remat-model","version":1})", "/: missing field 'ops'"},
        BadCase{"empty graph", doc(""), "/ops: a model needs at least an Input and a loss (got 0 ops)"},
        BadCase{"ops not array", R"({"format":"remat-model","version":1,"ops":{}})", "/ops: expected an array, got an object"},
        BadCase{"op not object", doc(kIn + ",3"), "/ops/1: expected an object, got an integer"},
        BadCase{"id mismatch", doc(kIn + R"(,{"id":5,"kind":"MSELoss","inputs":[0]})"), "/ops/1/id: id 5 must equal the op's position 1"},
        BadCase{"missing id", doc(kIn + R"(,{"kind":"MSELoss","inputs":[0]})"), "/ops/1: missing field 'id'"},
        BadCase{"missing kind", doc(kIn + R"(,{"id":1,"inputs":[0]})"), "/ops/1: missing field 'kind'"},
        BadCase{"unknown kind", doc(kIn + R"(,{"id":1,"kind":"Conv2d","inputs":[0]},)" + R"({"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/kind: unknown kind 'Conv2d' (expected one of Input, Linear,"},
        BadCase{"kind type", doc(kIn + R"(,{"id":1,"kind":7,"inputs":[0]})"), "/ops/1/kind: expected a string, got an integer"},
        BadCase{"unknown op field", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[0],"actvation":"relu"})"), "/ops/1/actvation: unknown field 'actvation'"},
        BadCase{"forward reference", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[2]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/inputs/0: op 2 is not an earlier op (ops must be listed in topological order: a forward reference or a cycle)"},
        BadCase{"self cycle", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[1]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/inputs/0: op 1 is not an earlier op"},
        BadCase{"dangling", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[9]})"), "/ops/1/inputs/0: op 9 does not exist (the model has ops 0..1)"},
        BadCase{"negative input", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[-1]})"), "/ops/1/inputs/0: op -1 does not exist"},
        BadCase{"input type", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":["x"]})"), "/ops/1/inputs/0: expected an integer, got a string"},
        BadCase{"shape mismatch", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0],"shape":[4,9]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('ReLU1'): shape [4,9] does not match input shape [4,8]"},
        BadCase{"add shapes", doc(kIn + R"(,{"id":1,"kind":"Linear","inputs":[0],"shape":[4,3]},{"id":2,"kind":"Add","inputs":[0,1]},{"id":3,"kind":"MSELoss","inputs":[2]})"),
                "/ops/2 ('Add2'): Add inputs have different shapes [4,8] and [4,3]"},
        BadCase{"arity", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0,0]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('ReLU1'): ReLU takes 1 input(s), got 2"},
        BadCase{"negative dim", doc(R"({"id":0,"kind":"Input","shape":[4,-8]},)" + kLoss1), "/ops/0/shape/1: value -8 is out of range [1, 1099511627776]"},
        BadCase{"float dim", doc(R"({"id":0,"kind":"Input","shape":[4,8.5]},)" + kLoss1), "/ops/0/shape/1: expected an integer, got a number"},
        BadCase{"huge dim", doc(R"({"id":0,"kind":"Input","shape":[4,100000000000000000000]},)" + kLoss1), "/ops/0/shape/1: expected an integer, got a number"},
        BadCase{"overflow", doc(R"({"id":0,"kind":"Input","shape":[1000000,1000000,1000000]},)" + kLoss1), "/ops/0/shape: tensor too large (over 2^48 bytes)"},
        BadCase{"generic overflow", doc(kIn + R"(,{"id":1,"kind":"Generic","inputs":[0],"shape":[1099511627776,1099511627776,1099511627776]},)" + R"({"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/shape: tensor too large (over 2^48 bytes)"},
        BadCase{"rank", doc(R"({"id":0,"kind":"Input","shape":[1,1,1,1,1,1,1,1,1]},)" + kLoss1), "/ops/0/shape: rank 9 is over the limit of 8"},
        BadCase{"missing shape", doc(R"({"id":0,"kind":"Input"},)" + kLoss1), "/ops/0 ('Input0'): Input needs a shape"},
        BadCase{"first not input", doc(R"({"id":0,"kind":"ReLU","shape":[4]},)" + kLoss1), "/ops/0/kind: the first op must be the Input, not ReLU"},
        BadCase{"second input", doc(kIn + "," + R"({"id":1,"kind":"Input","shape":[4]},)" + R"({"id":2,"kind":"MSELoss","inputs":[0]})"), "/ops/1/kind: only op 0 may be an Input"},
        BadCase{"no loss", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0]})"), "/ops/1/kind: the last op must be a loss (MSELoss, SoftmaxCELoss or BCEWithLogitsLoss), not ReLU"},
        BadCase{"loss in middle", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[0]},{"id":2,"kind":"MSELoss","inputs":[0]})"), "/ops/1/kind: a loss must be the last op"},
        BadCase{"unused op", doc(kIn + R"(,{"id":1,"name":"dead","kind":"ReLU","inputs":[0]},{"id":2,"kind":"MSELoss","inputs":[0]})"),
                "/ops/1: op 1 ('dead') is never used: every op must lead to the loss"},
        BadCase{"dtype", doc(R"({"id":0,"kind":"Input","shape":[4],"dtype":"f64"},)" + kLoss1), "/ops/0/dtype: unknown dtype 'f64'"},
        BadCase{"activation on linear", doc(kIn + R"(,{"id":1,"kind":"Linear","inputs":[0],"shape":[4,8],"activation":"relu"},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/activation: only Dense ops take an activation"},
        BadCase{"bad activation", doc(kIn + R"(,{"id":1,"kind":"Dense","inputs":[0],"shape":[4,8],"activation":"gelu"},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/activation: unknown activation 'gelu' (expected none, relu or tanh)"},
        BadCase{"dropout p", doc(kIn + R"(,{"id":1,"kind":"Dropout","inputs":[0],"p":1.5},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/p: value 1.5 is out of range [0.0, 1.0]"},
        BadCase{"dropout p 1", doc(kIn + R"(,{"id":1,"kind":"Dropout","inputs":[0],"p":1},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/p: dropout p must be below 1"},
        BadCase{"bytes zero", doc(R"({"id":0,"kind":"Input","shape":[4],"bytes":0},)" + kLoss1), "/ops/0/bytes: value 0 is out of range [1, 281474976710656]"},
        BadCase{"flops negative", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[0],"fwd_flops":-1})"), "/ops/1/fwd_flops: value -1 is out of range"},
        BadCase{"saved not input", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0]},{"id":2,"kind":"MSELoss","inputs":[1],"saved":[0]})"),
                "/ops/2/saved/0: op 0 is neither an input of this op nor the op itself"},
        BadCase{"simulate_only type", doc(R"({"id":0,"kind":"Input","shape":[4],"simulate_only":1},)" + kLoss1), "/ops/0/simulate_only: expected a boolean, got an integer"},
        BadCase{"values count", doc(kIn + R"(,{"id":1,"kind":"MulConst","inputs":[0],"const_shape":[8],"values":[1,2]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/values: 2 values for a constant of shape [8] (8 expected)"},
        BadCase{"values word", doc(kIn + R"(,{"id":1,"kind":"MulConst","inputs":[0],"values":"half"},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/values: expected numbers or \"causal\", got \"half\""},
        BadCase{"causal not square", doc(kIn + R"(,{"id":1,"kind":"MaskedFill","inputs":[0],"const_shape":[4,8],"values":"causal"},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/values: a causal mask needs a const_shape of (…, T, T) with leading 1s"},
        BadCase{"fill word", doc(kIn + R"(,{"id":1,"kind":"MaskedFill","inputs":[0],"const_shape":[8],"values":[0,0,0,0,0,0,0,1],"fill":"-infinity"},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/fill: expected a number, \"inf\" or \"-inf\", got a string"},
        BadCase{"learned mul", doc(kIn + R"(,{"id":1,"kind":"MulConst","inputs":[0],"values":2,"learned":true},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/learned: only AddConst, Concat ops take 'learned'"},
        BadCase{"copy on a kernel", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0],"copy":true},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/copy: only Reshape ops take 'copy'"},
        BadCase{"loss shape", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[0],"shape":[1]})"), "/ops/1 ('MSELoss1'): a loss produces a scalar"},
        BadCase{"deep nesting", std::string(5000, '[') + std::string(5000, ']'), "not a model file: nesting deeper than 32 levels"},
        BadCase{"id overflow", doc(R"({"id":18446744073709551615,"kind":"Input","shape":[4]},)" + kLoss1), "/ops/0/id: value 18446744073709551615 is out of range"},
        BadCase{"attribute on the wrong kind", doc(kIn + R"(,{"id":1,"kind":"ReLU","inputs":[0],"kernel":[3]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/kernel: only Conv, MaxPool, AvgPool, ConvTranspose ops take 'kernel'"},
        BadCase{"negative pads", doc(R"({"id":0,"kind":"Input","shape":[1,1,4]},{"id":1,"kind":"MaxPool","inputs":[0],"kernel":[2],"pads":[-1,0]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/pads/0: value -1 is out of range [0, 1099511627776]"},
        BadCase{"conv kernel rank", doc(R"({"id":0,"kind":"Input","shape":[1,2,4,4]},{"id":1,"kind":"Conv","inputs":[0],"channels":2,"kernel":[3]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('Conv1'): Conv over a rank-4 input needs a kernel of 2 dimension(s), got [3]"},
        BadCase{"bytes of a view", doc(kIn + R"(,{"id":1,"kind":"Transpose","inputs":[0],"bytes":4},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('Transpose1'): a Transpose is a view of its input: it owns no bytes (leave 'bytes' out)"},
        BadCase{"matmul shapes", doc(kIn + R"(,{"id":1,"kind":"MatMul","inputs":[0,0]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('MatMul1'): MatMul inner dimensions differ: [4,8] @ [4,8]"},
        BadCase{"count_include_pad on a max pool", doc(R"({"id":0,"kind":"Input","shape":[1,1,4]},{"id":1,"kind":"MaxPool","inputs":[0],"kernel":[2],"count_include_pad":false},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/count_include_pad: only AvgPool ops take 'count_include_pad'"},
        BadCase{"adaptive pool with a kernel", doc(R"({"id":0,"kind":"Input","shape":[1,1,4,4]},{"id":1,"kind":"AvgPool","inputs":[0],"kernel":[2,2],"output_size":[3,3]},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1 ('AvgPool1'): an adaptive AvgPool (output_size) takes no kernel, stride, pads, ceil_mode or count_include_pad"},
        BadCase{"bool attribute", doc(kIn + R"(,{"id":1,"kind":"Linear","inputs":[0],"shape":[4,8],"bias":0},{"id":2,"kind":"MSELoss","inputs":[1]})"),
                "/ops/1/bias: expected a boolean, got an integer"},
        BadCase{"label smoothing over 1", doc(kIn + R"(,{"id":1,"kind":"SoftmaxCELoss","inputs":[0],"label_smoothing":1.5})"),
                "/ops/1/label_smoothing: value 1.5 is out of range [0.0, 1.0]"},
        BadCase{"label smoothing on MSE", doc(kIn + R"(,{"id":1,"kind":"MSELoss","inputs":[0],"label_smoothing":0.1})"),
                "/ops/1/label_smoothing: only SoftmaxCELoss ops take 'label_smoothing'"}),
    [](const ::testing::TestParamInfo<BadCase>& i) {
      std::string n = i.param.what;
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

TEST(JsonModelFile, MissingAndHugeFilesAreRefusedBeforeReading) {
  try {
    (void)load_json_model("/nonexistent/m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model file '/nonexistent/m.json': cannot read it"), std::string::npos) << e.what();
  }
  const auto path = std::filesystem::temp_directory_path() / ("remat_huge_" + std::to_string(::getpid()) + ".json");
  { std::ofstream(path) << " "; }
  std::filesystem::resize_file(path, (uint64_t{256} << 20) + 1);  // sparse: no disk used
  try {
    (void)load_json_model(path.string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("268435457 bytes is over the limit of 256 MiB for JSON models"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(JsonModelFile, LoadModelDispatchesJsonByContentNotExtension) {
  const auto path = std::filesystem::temp_directory_path() / ("remat_model_" + std::to_string(::getpid()) + ".txt");
  { std::ofstream(path) << kExample; }
  EXPECT_EQ(load_model(path.string()).size(), 6);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Inputs that once crashed a fuzz target (tests/fuzz, tools/fuzz.sh): each
// must now be one InputError.
TEST(FuzzRegressions, EachIsOneInputError) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(REMAT_SOURCE_DIR) + "/tests/io/fuzz_regressions")) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_THROW((void)load_json_model(e.path().string()), InputError);
    ++n;
  }
  EXPECT_GE(n, 1);
}

TEST(FuzzRegressions, NumberOverflowMessage) {
  EXPECT_EQ(testing::json_error("88.077777775555E5555555555"), "m.json: not valid JSON: number overflow parsing '88.077777775555E5555555555'");
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// A large file round-trips op for op (how fast it loads is measured in
// tests/bench/bench_io.cpp: the first version was quadratic).
TEST(JsonModelLimits, LargeModelRoundTrips) {
  const Model original = make_preset("chain:300000");
  const Model m = parse_json_model(model_to_json(original).dump(), "big.json");
  ASSERT_EQ(m.size(), original.size());
  for (int v : {0, 1, 150000, 300000}) {
    EXPECT_EQ(m.op(v).kind, original.op(v).kind) << v;
    EXPECT_EQ(m.op(v).bytes, original.op(v).bytes) << v;
    EXPECT_EQ(m.op(v).inputs, original.op(v).inputs) << v;
  }
  EXPECT_EQ(m.param_bytes(), original.param_bytes());
}

// Pad: pads in F.pad's order (the last dimension first), the mode, a constant
// pad's fill (default 0) and negative pads (a crop) read back into the same
// ops; reflect and replicate keep their input, as autograd does. What PyTorch
// refuses is one clear error naming the op.
TEST(JsonModel, PadReadsBackAndRefusesWhatPyTorchRefuses) {
  const Model m = parse_json_model(doc(R"(
    {"id":0,"kind":"Input","shape":[2,3,6,7]},
    {"id":1,"kind":"Pad","inputs":[0],"pads":[1,2,-1,3],"fill":"-inf"},
    {"id":2,"kind":"Pad","inputs":[1],"mode":"reflect","pads":[2,1,0,0]},
    {"id":3,"kind":"Pad","inputs":[2],"mode":"circular","pads":[1,1,8,8]},
    {"id":4,"kind":"Pad","inputs":[3],"mode":"replicate","pads":[0,0,0,0,1,1]},
    {"id":5,"kind":"MSELoss","inputs":[4]})"), "p.json");
  EXPECT_EQ(m.op(1).shape, (Shape{2, 3, 8, 10}));
  EXPECT_EQ(m.op(1).attrs->scalar, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(m.op(2).shape, (Shape{2, 3, 8, 13}));
  EXPECT_EQ(m.op(3).shape, (Shape{2, 3, 24, 15}));
  EXPECT_EQ(m.op(4).shape, (Shape{2, 5, 24, 15}));
  EXPECT_TRUE(m.op(1).saved.empty());
  EXPECT_EQ(m.op(2).saved, (std::vector<int>{1}));
  EXPECT_TRUE(m.op(3).saved.empty());
  EXPECT_EQ(m.op(4).saved, (std::vector<int>{3}));
  EXPECT_TRUE(m.executable());
  const auto j = model_to_json(m);
  EXPECT_EQ(j["ops"][1]["mode"], "constant");
  EXPECT_EQ(j["ops"][1]["fill"], "-inf");
  EXPECT_EQ(j["ops"][2]["mode"], "reflect");
  EXPECT_FALSE(j["ops"][2].contains("fill"));
  expect_identical(m, parse_json_model(j.dump(), "again"));
  const std::string in = R"({"id":0,"kind":"Input","shape":[2,3,7]},)";
  const std::string loss = R"(,{"id":2,"kind":"MSELoss","inputs":[1]})";
  const auto error = [&](const std::string& pad) { return json_error(doc(in + pad + loss)); };
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"mode":"reflect","pads":[7,0]})")
                .find("/ops/1 ('Pad1'): reflect padding (7, 0) of dimension 2 (size 7): reflect pads must be below the size"),
            std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"mode":"circular","pads":[0,8]})").find("circular pads must be at most the size"),
            std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"mode":"replicate","pads":[-1,0]})").find("only constant padding crops"),
            std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"mode":"reflect","pads":[1,1,1,1,1,1]})")
                .find("reflect padding of 3 dimension(s) needs a (C, ...) or (N, C, ...) input of rank 4 or 5"),
            std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"pads":[-4,-3]})").find("leaves nothing"), std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"pads":[1]})").find("a (before, after) pair of pads per padded dimension"),
            std::string::npos);
  EXPECT_NE(error(R"({"id":1,"kind":"Pad","inputs":[0],"mode":"wrap","pads":[1,1]})")
                .find("/ops/1/mode: unknown mode 'wrap' (expected constant, reflect, replicate or circular)"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
